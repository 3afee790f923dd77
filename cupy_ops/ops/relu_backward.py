"""relu_backward: the gradient through ReLU times a scale (cuda_src/relu_backward.cu).

Used by the autograd formulas of relu, relu_div and linear_relu_div (cupy_ops/torch_ops.py).
"""
from __future__ import annotations

import torch

from .elementwise import Elementwise

KERNEL = Elementwise("relu_backward.cu", "relu_backward")   # binary: (grad, ref) -> out


def relu_backward(grad: torch.Tensor, ref: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """``0 where ref <= 0 else grad * scale``: torch's ``threshold_backward(grad * scale, ref, 0)``.

    Args:
        grad: CUDA tensor, the incoming gradient.
        ref: tensor of ``grad``'s shape, dtype and device deciding the mask (the input or the
            output of the ReLU): masked where ``ref <= 0``; NaN is never masked.
        scale: multiplies the gradient (1 / divisor for relu_div, rounded as torch rounds it).
    Returns:
        A contiguous tensor of ``grad``'s shape and dtype.
    """
    grad = grad.contiguous()
    ref = ref.contiguous()
    out = torch.empty_like(grad)
    KERNEL.launch((grad, ref, out), (scale,), grad.get_device())
    return out
