"""Torch glue: each op as a ``torch.library`` custom op (``cupy_ops::relu``, ...) with a fake
implementation and registered autograd, so ops work under ``torch.compile(fullgraph=True)``,
CUDA graphs (``mode="reduce-overhead"``) and training.

Plain eager calls do not come here (the dispatcher costs ~18 us a call: docs/tuning.md, "Host
overhead"): the public functions (api.py) use these ops only when autograd must record the
call or torch.compile is tracing.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import ops
from .ops import divisor as _divisor

_lib = "cupy_ops"


@torch.library.custom_op(f"{_lib}::relu", mutates_args=())
def relu(x: Tensor) -> Tensor:
    return ops.relu(x)


@relu.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_lib}::relu_div", mutates_args=())
def relu_div(x: Tensor, divisor: float) -> Tensor:
    return ops.relu_div(x, divisor)


@relu_div.register_fake
def _(x, divisor):
    return torch.empty_like(x)


@torch.library.custom_op(f"{_lib}::relu_backward", mutates_args=())
def relu_backward(grad: Tensor, ref: Tensor, scale: float, flip: bool) -> Tensor:
    return ops.relu_backward(grad, ref, scale, flip)


@relu_backward.register_fake
def _(grad, ref, scale, flip):
    return torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)


@torch.library.custom_op(f"{_lib}::matmul", mutates_args=())
def matmul(a: Tensor, b: Tensor, algo: str = "auto") -> Tensor:
    return ops.matmul(a, b, algo=algo)


@matmul.register_fake
def _(a, b, algo="auto"):
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op(f"{_lib}::linear_relu_div", mutates_args=())
def linear_relu_div(x: Tensor, weight: Tensor, bias: Optional[Tensor], divisor: float,
                    algo: str = "auto") -> Tensor:
    return ops.linear_relu_div(x, weight, bias, divisor, algo=algo)


@linear_relu_div.register_fake
def _(x, weight, bias, divisor, algo="auto"):
    return x.new_empty((x.shape[0], weight.shape[0]))


# --- autograd ----------------------------------------------------------------------------
# relu:      dx = grad where x > 0 (or NaN), else 0                 (torch's threshold_backward)
# relu_div:  dx = grad * (1/d) where x > 0 (or NaN), else 0        (1/d rounded as torch does)
# matmul:    da = grad @ b.T,  db = a.T @ grad
# linear_relu_div, y = relu(z) * s with z = x @ w.T + b:  dz = grad * s where z > 0,
#            read off y (y > 0 for s > 0, y < 0 for s < 0); dx = dz @ w, dw = dz.T @ x, db = sum(dz)

def _save_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.divisor = inputs[1] if len(inputs) > 1 else 1.0


def _relu_grad(ctx, grad):
    (x,) = ctx.saved_tensors
    return relu_backward(grad, x, 1.0, False)


def _relu_div_grad(ctx, grad):
    (x,) = ctx.saved_tensors
    return relu_backward(grad, x, _divisor.scale_for(ctx.divisor, x.dtype), False), None


def _save_operands(ctx, inputs, output):
    a, b = inputs[0], inputs[1]
    ctx.save_for_backward(a, b)
    ctx.algo = inputs[2] if len(inputs) > 2 else "auto"


def _matmul_grad(ctx, grad):
    a, b = ctx.saved_tensors
    da = matmul(grad, b.t(), ctx.algo) if ctx.needs_input_grad[0] else None
    db = matmul(a.t(), grad, ctx.algo) if ctx.needs_input_grad[1] else None
    return da, db, None


def _save_linear(ctx, inputs, output):
    x, weight, bias, divisor = inputs[:4]
    ctx.save_for_backward(x, weight, output)
    ctx.divisor = divisor
    ctx.algo = inputs[4] if len(inputs) > 4 else "auto"
    ctx.has_bias = bias is not None


def _linear_grad(ctx, grad):
    x, weight, y = ctx.saved_tensors
    scale = _divisor.scale_for(ctx.divisor, x.dtype)
    dz = relu_backward(grad, y, scale, scale < 0)
    dx = matmul(dz, weight, ctx.algo) if ctx.needs_input_grad[0] else None
    dw = matmul(dz.t(), x, ctx.algo) if ctx.needs_input_grad[1] else None
    db = dz.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return dx, dw, db, None, None


relu.register_autograd(_relu_grad, setup_context=_save_input)
relu_div.register_autograd(_relu_div_grad, setup_context=_save_input)
matmul.register_autograd(_matmul_grad, setup_context=_save_operands)
linear_relu_div.register_autograd(_linear_grad, setup_context=_save_linear)
