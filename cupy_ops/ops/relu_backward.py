"""relu_backward: the gradient through ReLU divided by a number (cuda_src/relu_backward.cu), the op
the backward and forward-AD rules of relu, relu_div and linear_relu_div are built of."""

from __future__ import annotations

import torch

from .. import checks
from ..op import op
from .divisor import scale_for
from .elementwise import Elementwise, elementwise_vmap

KERNEL = Elementwise("relu_backward.cu", "relu_backward")  # binary: (grad, ref) -> out


def _output(grad, ref, divisor):
    device = checks.cuda_tensor("grad", grad)
    checks.tensor("ref", ref)
    checks.same_dtype("ref", ref, "grad", grad)
    checks.same_device("ref", ref, "grad", device)
    if ref.shape != grad.shape:
        raise ValueError(f"ref must have the shape of grad {tuple(grad.shape)}, got {tuple(ref.shape)}")
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


def _fresh(grad, ref, divisor):
    return KERNEL.fresh2(grad, ref, (scale_for(divisor, grad.dtype),))


@op("cupy_ops::relu_backward", output=_output, elementwise=True, check_devices=False, fast=_fresh)
def relu_backward(grad: torch.Tensor, ref: torch.Tensor, divisor: float = 1.0, *, out: torch.Tensor) -> None:
    """``0 where ref <= 0 else grad / divisor``: torch's ``threshold_backward(grad / divisor, ref,
    0)``, the division as torch divides by a number (times its reciprocal, ``divisor.scale_for``).

    Args:
        grad: CUDA tensor, the incoming gradient.
        ref: tensor of ``grad``'s shape, dtype and device deciding the mask (the input or the
            output of the ReLU): masked where ``ref <= 0``; NaN is never masked.
        divisor: divides the gradient (relu_div's and linear_relu_div's divisor; a number, so
            that a traced graph carries it as torch.compile gives it).
    Returns:
        A contiguous tensor of ``grad``'s shape and dtype.
    """
    KERNEL.launch((grad, ref, out), (scale_for(divisor, grad.dtype),), grad.get_device())


# the mask is piecewise constant: only grad has a derivative
@relu_backward.backward(save=("ref", "divisor"))
def _(ctx, gg):
    return relu_backward(gg, ctx.ref, ctx.divisor), None, None


@relu_backward.jvp(save=("ref", "divisor"))
def _(ctx, t_grad, t_ref, t_divisor):
    return relu_backward(t_grad, ctx.ref, ctx.divisor) if t_grad is not None else torch.zeros_like(ctx.ref)


relu_backward.vmap(elementwise_vmap(relu_backward))
