"""Shared launcher of the elementwise kernels (relu, relu_div): layouts, ``out=``, in-place.

This is the eager hot path: per call it does the validation, one ``torch.empty_like``, a few
integer operations and one launch, with everything else (kernel handles, argument formats,
SM counts) cached.
"""
from __future__ import annotations

import torch

from .. import launch

THREADS = launch.ELEMENTWISE_THREADS


class Elementwise:
    """One elementwise kernel family: ``template <class T> kernel(x, y, n, head, vec, ...extra)``.

    ``extra_signature(dtype)`` gives the signature of the extra arguments for a dtype.
    """

    def __init__(self, filename: str, name: str, extra_signature=lambda dtype: ()):
        self.filename = filename
        self.name = name
        self.exprs = {dt: f"{name}<{c}>" for dt, c in launch.DTYPE_NAMES.items()}
        self.extra_signature = extra_signature
        self._handles: dict = {}

    def handle(self, dtype: torch.dtype, device: int) -> launch.KernelHandle:
        h = self._handles.get((dtype, device))
        if h is None:
            sig = ("ptr", "ptr", "i64", "i64", "i32") + tuple(self.extra_signature(dtype))
            h = self._handles[(dtype, device)] = launch.kernel(self.filename, self.exprs[dtype], device, sig)
        return h

    def __call__(self, x, out, extra_args: tuple, device: int) -> torch.Tensor:
        """Apply to ``x`` (already checked: a CUDA tensor of a supported dtype on ``device``).

        ``out=None`` allocates the result like torch does (same strides when ``x`` is dense);
        ``out=x`` works in place; any other ``out`` must match ``x``'s shape, dtype and device.
        Contiguous and dense inputs are read where they are; views with gaps between elements
        are gathered with ``x.contiguous()`` first (and, in place, written back).
        """
        if out is None:
            if not (x.is_contiguous() or launch.is_dense(x)):
                x = x.contiguous()
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
        if n == 0:
            return
        h = self._handles.get((x.dtype, device)) or self.handle(x.dtype, device)
        xp = x.data_ptr()
        yp = y.data_ptr()
        blocks, head, vec = _plan(n, _ITEMSIZE[x.dtype], xp, yp)
        _launch_1d(h, blocks, THREADS, (xp, yp, n, head, vec, *extra_args))


_plan = launch.elementwise_plan
_launch_1d = launch.launch_1d
_ITEMSIZE = {dt: torch.empty((), dtype=dt).element_size() for dt in launch.DTYPE_NAMES}
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
