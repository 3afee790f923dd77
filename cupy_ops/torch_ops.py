"""Torch glue: each op as a ``torch.library`` custom op (``cupy_ops::relu``, ...) with a fake
implementation and registered autograd, so ops work under ``torch.compile(fullgraph=True)``,
CUDA graphs (``mode="reduce-overhead"``) and training.

Plain eager calls do not come here (the dispatcher costs ~18 us a call: docs/tuning.md, "Host
overhead"): the public functions (api.py) use these ops only when autograd must record the
call or torch.compile is tracing.
"""

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
def relu_backward(grad: Tensor, ref: Tensor, scale: float) -> Tensor:
    return ops.relu_backward(grad, ref, scale)


@relu_backward.register_fake
def _(grad, ref, scale):
    return torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)


@torch.library.custom_op(f"{_lib}::matmul", mutates_args=())
def matmul(a: Tensor, b: Tensor, algo: str) -> Tensor:
    return ops.matmul(a, b, algo=algo)


@matmul.register_fake
def _(a, b, algo="auto"):
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op(f"{_lib}::linear_relu", mutates_args=())
def linear_relu(x: Tensor, weight: Tensor, bias: Optional[Tensor], algo: str) -> Tensor:
    return ops.linear_relu_div(x, weight, bias, 1.0, algo=algo)


@linear_relu.register_fake
def _(x, weight, bias, algo="auto"):
    return x.new_empty((x.shape[0], weight.shape[0]))


@torch.library.custom_op(f"{_lib}::linear_relu_div", mutates_args=())
def linear_relu_div(x: Tensor, weight: Tensor, bias: Optional[Tensor], divisor: float,
                    algo: str) -> Tensor:
    return ops.linear_relu_div(x, weight, bias, divisor, algo=algo)


@linear_relu_div.register_fake
def _(x, weight, bias, divisor, algo="auto"):
    return x.new_empty((x.shape[0], weight.shape[0]))


# --- autograd ----------------------------------------------------------------------------
# Each formula is torch's for the same expression, and is built of differentiable ops (these
# custom ops and torch's), so every op is differentiable to any order.
# relu:          dx = threshold_backward(grad, y, 0): grad where y = relu(x) > 0 (or NaN), else 0
# relu_div:      dx = threshold_backward(grad / d, x, 0)  (grad / d by torch's reciprocal rule)
#                (a divisor *tensor* is handled by api.py as torch.relu(x) / d: torch's autograd)
# relu_backward: d(grad) = relu_backward(gg, ref, scale); the mask is piecewise constant: d(ref) = 0
# matmul:        da = grad @ b.T,  db = a.T @ grad
# linear_relu, r = relu(z) with z = x @ w.T + b rounded to the dtype (as torch's Linear output):
#                dz = threshold_backward(grad, r, 0); dx = dz @ w, dw = dz.T @ x, db = sum(dz)
# linear_relu_div = linear_relu / d: dz = threshold_backward(grad / d, r, 0), r recomputed (the
#                mask is the pre-activation's sign, which the divided output may have lost:
#                relu(z) / d rounds to 0 for tiny z, and is inf / NaN everywhere for d = 0 / NaN).
#                api.py computes linear_relu(x, w, b) / d under autograd instead (r kept, no GEMM
#                again); this formula serves callers of torch.ops.cupy_ops.linear_relu_div.

def _save_output(ctx, inputs, output):
    ctx.save_for_backward(output)


def _relu_grad(ctx, grad):
    (y,) = ctx.saved_tensors
    return relu_backward(grad, y, 1.0)


def _save_input(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.divisor = inputs[1]


def _relu_div_grad(ctx, grad):
    (x,) = ctx.saved_tensors
    return relu_backward(grad, x, _divisor.scale_for(ctx.divisor, x.dtype)), None


def _save_backward(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])
    ctx.scale = inputs[2]


def _relu_backward_grad(ctx, gg):
    (ref,) = ctx.saved_tensors
    return relu_backward(gg, ref, ctx.scale), None, None


def _save_operands(ctx, inputs, output):
    a, b = inputs[0], inputs[1]
    ctx.save_for_backward(a, b)
    ctx.algo = inputs[2] if len(inputs) > 2 else "auto"


def _matmul_grad(ctx, grad):
    a, b = ctx.saved_tensors
    da = matmul(grad, b.t(), ctx.algo) if ctx.needs_input_grad[0] else None
    db = matmul(a.t(), grad, ctx.algo) if ctx.needs_input_grad[1] else None
    return da, db, None


def _linear_input_grads(ctx, dz, x, weight):
    dx = matmul(dz, weight, ctx.algo) if ctx.needs_input_grad[0] else None
    dw = matmul(dz.t(), x, ctx.algo) if ctx.needs_input_grad[1] else None
    db = dz.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return dx, dw, db


def _save_linear_relu(ctx, inputs, output):
    x, weight, bias = inputs[:3]
    ctx.save_for_backward(x, weight, output)
    ctx.algo = inputs[3] if len(inputs) > 3 else "auto"
    ctx.has_bias = bias is not None


def _linear_relu_grad(ctx, grad):
    x, weight, r = ctx.saved_tensors
    return (*_linear_input_grads(ctx, relu_backward(grad, r, 1.0), x, weight), None)


def _save_linear_relu_div(ctx, inputs, output):
    x, weight, bias, divisor = inputs[:4]
    ctx.save_for_backward(x, weight, bias)
    ctx.divisor = divisor
    ctx.algo = inputs[4] if len(inputs) > 4 else "auto"
    ctx.has_bias = bias is not None


def _linear_relu_div_grad(ctx, grad):
    x, weight, bias = ctx.saved_tensors
    r = linear_relu(x, weight, bias, ctx.algo)
    dz = relu_backward(grad, r, _divisor.scale_for(ctx.divisor, x.dtype))
    return (*_linear_input_grads(ctx, dz, x, weight), None, None)


relu.register_autograd(_relu_grad, setup_context=_save_output)
relu_div.register_autograd(_relu_div_grad, setup_context=_save_input)
relu_backward.register_autograd(_relu_backward_grad, setup_context=_save_backward)
matmul.register_autograd(_matmul_grad, setup_context=_save_operands)
linear_relu.register_autograd(_linear_relu_grad, setup_context=_save_linear_relu)
linear_relu_div.register_autograd(_linear_relu_div_grad, setup_context=_save_linear_relu_div)
