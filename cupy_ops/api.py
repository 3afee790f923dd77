"""Public API: ``cupy_ops.relu``, ``relu_div``, ``matmul``, ``linear_relu_div`` (and in-place forms).

A plain eager call goes straight to the op's launcher (cupy_ops/ops): a few microseconds of
host time. When autograd has to record the call (an input requires grad and grad mode is
on) or torch.compile is tracing, the call goes through the ``cupy_ops::*`` custom ops
instead (cupy_ops/torch_ops.py), which carry the fake implementations and the backward.
The docstrings of the launchers in ``cupy_ops.ops`` list shapes, dtypes and errors; the
arguments are checked there (and in ``ops.divisor.number`` for the custom ops' divisor).
"""
from __future__ import annotations

import torch

from . import ops, torch_ops
from .ops import divisor as _divisor
from .ops import gemm as _gemm
from .ops.gemm_plan import GemmPlan
from .ops.relu import KERNEL as _RELU
from .ops.relu_div import KERNEL as _RELU_DIV

_is_compiling = torch.compiler.is_compiling
_scale_for = _divisor.scale_for
_relu_fast = _RELU.fast
_relu_div_fast = _RELU_DIV.fast


def _record(*tensors) -> bool:
    """True when this call must go through the custom op (autograd or torch.compile)."""
    if _is_compiling():
        return True
    if not torch.is_grad_enabled():
        return False
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x)``, bit for bit (see ``cupy_ops.ops.relu`` for arguments and errors).

    Differentiable, and traceable by torch.compile (as ``cupy_ops::relu``) when ``out`` is None.
    """
    if out is None:
        y = _relu_fast(x, ())
        if y is not None:
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
        y = _relu_div_fast(x, (_scale_for(divisor, x.dtype), 0))
        if y is not None:
            return y
    if out is None and _record(x):
        return torch_ops.relu_div(x, _divisor.number(divisor, " for autograd and torch.compile"))
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
        d = _divisor.number(divisor, " for linear_relu_div")
        return torch_ops.linear_relu_div(x, weight, bias, d, algo)
    return ops.linear_relu_div(x, weight, bias, divisor, algo=algo)


def gemm_plan(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto", bias_relu_scale: bool = False) -> GemmPlan:
    """Which kernel ``matmul(a, b, algo=algo)`` takes, and how: the kernel family and
    instantiation, tile, split-K, grid and what is done to each operand (read in place,
    copied, transposed). For ``linear_relu_div(x, weight, ...)`` pass ``(x, weight.T)`` and
    ``bias_relu_scale=True``. ``print(plan)`` gives one readable line.

    Raises the errors of ``matmul`` for bad arguments; ``ValueError`` when M or N is 0 (no
    kernel runs).
    """
    return _gemm.explain(a, b, algo, bias_relu_scale)
