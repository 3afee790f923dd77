"""Public API: ``cupy_ops.relu``, ``relu_div``, ``matmul``, ``linear_relu_div`` (and in-place forms).

A plain eager call goes straight to the op's launcher (cupy_ops/ops): a few microseconds of
host time. When autograd has to record the call (an input requires grad and grad mode is
on) or torch.compile is tracing, the call goes through the ``cupy_ops::*`` custom ops
instead (cupy_ops/torch_ops.py), which carry the fake implementations and the backward.
The docstrings of the launchers in ``cupy_ops.ops`` list shapes, dtypes and errors.
"""
from __future__ import annotations

import numbers

import torch

from . import launch, ops, torch_ops
from .ops import _divisor
from .ops.relu import KERNEL as _RELU
from .ops.relu_div import KERNEL as _RELU_DIV

_is_compiling = torch.compiler.is_compiling
_scale_for = _divisor.scale_for
_Tensor = torch.Tensor
_grad_enabled = torch.is_grad_enabled
_empty_like = torch.empty_like
_relu_handles = _RELU._handles
_launch_elementwise = launch.launch_elementwise


def _record(*tensors) -> bool:
    """True when this call must go through the custom op (autograd or torch.compile)."""
    if _is_compiling():
        return True
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _number(divisor, what: str):
    if isinstance(divisor, torch.Tensor):
        if divisor.is_cuda:
            raise ValueError(f"divisor must be a number (or a CPU tensor) for {what}, got a CUDA tensor")
        return divisor.item()
    return divisor


def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x)``, bit for bit (see ``cupy_ops.ops.relu`` for arguments and errors).

    Differentiable, and traceable by torch.compile (as ``cupy_ops::relu``) when ``out`` is None.
    """
    if out is None:
        # eager fast path, inlined (each Python call costs ~0.1 us): a contiguous CUDA tensor of
        # an already compiled dtype, no autograd, not tracing
        if type(x) is _Tensor and x.is_cuda and x.is_contiguous() and not (x.requires_grad and _grad_enabled()):
            h = _relu_handles.get((x.dtype, x.get_device()))
            if h is not None and not _is_compiling():
                y = _empty_like(x)
                n = x.numel()
                if n:
                    _launch_elementwise(h, n, x.element_size(), (x.data_ptr(), y.data_ptr()))
                return y
        if _record(x):
            return torch_ops.relu(x)
    return ops.relu(x, out=out)


def relu_(x: torch.Tensor) -> torch.Tensor:
    """In-place ``relu``; not differentiable (an input that requires grad is a RuntimeError)."""
    return ops.relu_(x)


def relu_div(x: torch.Tensor, divisor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x) / divisor`` in one pass, bit for bit (see ``cupy_ops.ops.relu_div``).

    Differentiable with respect to ``x`` and traceable by torch.compile when ``out`` is None
    and ``divisor`` is a number (or a CPU tensor).
    """
    if out is None and type(divisor) is float and type(x) is torch.Tensor:
        y = _RELU_DIV.fast(x, (_scale_for(divisor, x.dtype), 0))
        if y is not None:
            return y
    if out is None and _record(x):
        d = _number(divisor, "autograd and torch.compile")
        if isinstance(d, bool) or not isinstance(d, numbers.Real):
            ops.relu_div(x, d)  # raises the op's own typed error
        return torch_ops.relu_div(x, float(d))
    return ops.relu_div(x, divisor, out=out)


def relu_div_(x: torch.Tensor, divisor) -> torch.Tensor:
    """In-place ``relu_div``; not differentiable."""
    return ops.relu_div_(x, divisor)


def matmul(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto") -> torch.Tensor:
    """``a @ b`` for 2-D tensors (see ``cupy_ops.ops.matmul``); differentiable, traceable."""
    if _record(a, b):
        return torch_ops.matmul(a, b, algo)
    return ops.matmul(a, b, algo=algo)


def linear_relu_div(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, divisor,
                    *, algo: str = "auto") -> torch.Tensor:
    """``relu(x @ weight.T + bias) / divisor`` fused (see ``cupy_ops.ops.linear_relu_div``);
    differentiable with respect to x, weight and bias, traceable by torch.compile."""
    if _record(x, weight, bias):
        d = _number(divisor, "linear_relu_div")
        if isinstance(d, bool) or not isinstance(d, numbers.Real):
            ops.linear_relu_div(x, weight, bias, d, algo=algo)  # raises the op's own typed error
        return torch_ops.linear_relu_div(x, weight, bias, float(d), algo)
    return ops.linear_relu_div(x, weight, bias, divisor, algo=algo)
