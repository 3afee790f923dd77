"""relu: ``torch.relu`` as a cupy_ops op (cuda_src/relu.cu), with its in-place form."""

from __future__ import annotations

import torch

from .. import checks
from ..op import op
from .elementwise import Elementwise, elementwise_vmap
from .relu_backward import relu_backward

KERNEL = Elementwise("relu.cu", "relu")
_is_compiling = torch.compiler.is_compiling


def _output(x):
    checks.cuda_tensor("x", x)
    return torch.empty_like(x)  # torch.relu's layout: x's strides where x is dense


@op(
    "cupy_ops::relu",
    output=_output,
    inplace="x",
    contiguous=False,
    any_out_layout=True,
    elementwise=True,
    check_devices=False,
    fast=KERNEL.fresh,
)
def _relu(x: torch.Tensor, *, out: torch.Tensor) -> None:
    KERNEL.write(x, out, ())


# torch's: threshold_backward(grad, relu(x), 0), the mask from the output (NaN passes)
@_relu.backward(save=("out",))
def _(ctx, grad):
    return relu_backward(grad, ctx.out, 1.0)


@_relu.jvp(save=("out",))
def _(ctx, t):
    return relu_backward(t, ctx.out, 1.0)


_relu.vmap(elementwise_vmap(_relu))


def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x)``, bit for bit: NaN stays NaN, -0.0 and negatives give +0.0.

    Differentiable to any order (both modes); ``torch.func.vmap``; traceable by torch.compile as
    ``cupy_ops::relu`` (``cupy_ops::relu_out`` with ``out``); under autocast it runs in x's dtype,
    as torch's.

    Args:
        x: CUDA tensor of any shape, float32 / float16 / bfloat16 / float64, any strides.
        out: optional tensor of ``x``'s dtype and device to write into (resized as torch
            resizes it when its shape differs).
    Returns:
        A tensor of ``x``'s shape and dtype (``out`` when given).
    Raises:
        TypeError: ``x`` or ``out`` is not a tensor, or has an unsupported or mismatched dtype.
        ValueError: ``x`` is not on a CUDA device, or ``out`` is on another device.
        RuntimeError: as torch: ``out`` partially overlaps ``x`` or repeats elements; ``out=``
            with an input that requires grad (grad mode on).

    Example:
        >>> y = cupy_ops.relu(torch.randn(1024, device="cuda"))
    """
    if out is None and not _is_compiling():
        return _relu.call((x,))
    return _relu(x, out=out)


def relu_(x: torch.Tensor) -> torch.Tensor:
    """In-place ``relu``: overwrites and returns ``x``, bumping its version counter as torch's
    ``relu_`` does. On a tensor autograd tracks (a non-leaf that requires grad) the call is
    recorded, as torch records ``x.relu_()``; on a leaf that requires grad it raises torch's
    RuntimeError. Traceable by torch.compile (``cupy_ops::relu_out`` with ``out=x``).

    Args:
        x: CUDA tensor of any shape, float32 / float16 / bfloat16 / float64, any strides
            (a view with gaps is gathered and written back).
    Returns:
        ``x``.
    Raises:
        TypeError: ``x`` is not a tensor of a supported dtype. ValueError: not on CUDA.
        RuntimeError: ``x`` repeats elements (a broadcast view), or is a leaf that requires grad.

    Example:
        >>> x = torch.randn(1024, device="cuda"); cupy_ops.relu_(x)
    """
    return _relu.call_inplace((x,))
