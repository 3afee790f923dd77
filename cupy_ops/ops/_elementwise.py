"""Shared launcher of the elementwise kernels (relu, relu_div): layouts, ``out=``, in-place."""
from __future__ import annotations

import torch

from .. import compiler, launch


def run(filename: str, exprs: dict, x, out, extra_args: tuple, op_name: str) -> torch.Tensor:
    """Apply the elementwise kernel ``exprs[x.dtype]`` of ``filename`` to ``x``.

    ``out=None`` allocates the result like torch does (same strides when ``x`` is dense);
    ``out=x`` works in place; any other ``out`` must match ``x``'s shape, dtype and device.
    Contiguous and dense inputs are read in place; other views (gaps between elements) are
    gathered with ``x.contiguous()`` first.
    """
    launch.check_tensor("x", x)
    device = launch.check_cuda("x", x)
    if out is not None:
        _check_out(out, x, device, op_name)
        if out is x or (out.stride() == x.stride() and launch.is_dense(x)):
            _launch(filename, exprs, x, out, extra_args, device)
            return out
        out.copy_(run(filename, exprs, x, None, extra_args, op_name))
        return out
    if not launch.is_dense(x):
        x = x.contiguous()
    y = torch.empty_like(x)  # dense x: same strides, so both are walked as flat arrays
    _launch(filename, exprs, x, y, extra_args, device)
    return y


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


def _launch(filename: str, exprs: dict, x: torch.Tensor, y: torch.Tensor, extra_args: tuple, device: int) -> None:
    n = x.numel()
    if n == 0:
        return
    if y is not x and y.stride() != x.stride():
        raise AssertionError("internal: elementwise launch needs matching layouts")  # not user-reachable
    x_ptr, y_ptr = x.data_ptr(), y.data_ptr()
    blocks, head, vec = launch.elementwise_plan(n, x.element_size(), x_ptr, y_ptr, launch.sm_count(device))
    fn = compiler.get_function(filename, exprs[x.dtype], device)
    launch.launch(fn, (blocks, 1, 1), (launch.ELEMENTWISE_THREADS, 1, 1),
                  (x_ptr, y_ptr, n, head, _INT32[vec]) + extra_args, device)


import numpy as _np  # noqa: E402

_INT32 = (_np.int32(0), _np.int32(1))
