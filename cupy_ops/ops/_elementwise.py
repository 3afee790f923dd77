"""Shared launcher of the elementwise kernels (relu, relu_div): layouts, ``out=``, in-place.

This is the eager hot path: per call it does the validation, one ``torch.empty_like``, a few
integer operations and one launch, with everything else (kernel handles, argument formats)
cached. (``cupy_ops.relu`` inlines ``Elementwise.fast`` in api.py: one Python call less.)
"""
from __future__ import annotations

import torch

from .. import launch
from ..kernel import Kernel

THREADS = launch.ELEMENTWISE_THREADS


class Elementwise:
    """An elementwise kernel family ``template <class T> kernel(x, [x2,] y, n, head, vec, ...extra)``
    (cuda_src/elementwise.cuh), launched through ``cupy_ops.Kernel``."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.name = kernel.name
        self._handles: dict = {}

    def handle(self, dtype: torch.dtype, device: int) -> launch.KernelHandle:
        h = self._handles.get((dtype, device))
        if h is None:
            h = self._handles[(dtype, device)] = self.kernel.handle(dtype, device)
        return h

    def __call__(self, x, out, extra_args: tuple, device: int) -> torch.Tensor:
        """Apply to ``x`` (already checked: a CUDA tensor of a supported dtype on ``device``).

        ``out=None`` allocates the result like torch does (same strides when ``x`` is dense);
        ``out=x`` works in place; any other ``out`` must match ``x``'s shape, dtype and device.
        Contiguous and dense inputs are read where they are; views with gaps between elements
        are gathered into a dense copy first (and, for ``out``/in place, copied back).
        """
        if out is None:
            if not (x.is_contiguous() or launch.is_dense(x)):
                # gather into the layout torch.empty_like picks (dense, in x's stride order), so
                # the result's strides are what torch.relu and the ops' fake kernels give
                x = torch.empty_like(x).copy_(x)
            y = torch.empty_like(x)  # dense x: same strides, so both are walked as flat arrays
            self.launch(x, y, extra_args, device)
            return y
        _check_out(out, x, device, self.name)
        if (out is x or out.stride() == x.stride()) and launch.is_dense(x):
            self.launch(x, out, extra_args, device)
            return out
        out.copy_(self(x, None, extra_args, device))
        return out

    def launch(self, x: torch.Tensor, y: torch.Tensor, extra_args: tuple, device: int) -> None:
        """Launch on dense ``x`` into ``y`` of the same layout (``y`` may be ``x``)."""
        n = x.numel()
        if n:
            h = self._handles.get((x.dtype, device)) or self.handle(x.dtype, device)
            launch.launch_elementwise(h, n, x.element_size(), (x.data_ptr(), y.data_ptr()), extra_args)

    def launch2(self, x: torch.Tensor, x2: torch.Tensor, y: torch.Tensor, extra_args: tuple, device: int) -> None:
        """Binary form: ``y = op(x, x2)``, all three dense with one layout."""
        n = x.numel()
        if n:
            h = self._handles.get((x.dtype, device)) or self.handle(x.dtype, device)
            launch.launch_elementwise(h, n, x.element_size(), (x.data_ptr(), x2.data_ptr(), y.data_ptr()),
                                      extra_args)

    def fast(self, x: torch.Tensor, extra_args: tuple):
        """The eager fast path: the result, or None when ``x`` needs the general path (not a
        contiguous CUDA tensor of a compiled dtype, autograd or torch.compile involved)."""
        if type(x) is torch.Tensor and x.is_contiguous() and x.is_cuda and not (x.requires_grad and _grad_enabled()):
            h = self._handles.get((x.dtype, x.get_device()))
            if h is not None and not _is_compiling():
                y = torch.empty_like(x)
                n = x.numel()
                if n:
                    launch.launch_elementwise(h, n, x.element_size(), (x.data_ptr(), y.data_ptr()), extra_args)
                return y
        return None


_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_compiling


def _check_out(out, x, device: int, op_name: str) -> None:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    launch.check_same_dtype("out", out, "x", x)
    if out.shape != x.shape:
        raise ValueError(f"out must have the shape of x {tuple(x.shape)}, got {tuple(out.shape)}")
    launch.check_same_device("out", out, "x", device)
    if out.requires_grad and torch.is_grad_enabled():
        raise RuntimeError(
            f"out (or x for the in-place {op_name}_) requires grad: an in-place write would break "
            "autograd; use the out-of-place form or torch.no_grad()"
        )
