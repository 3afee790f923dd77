"""relu_backward: the gradient through ReLU times a scale (cuda_src/relu_backward.cu).

Used by the autograd formulas of relu, relu_div and linear_relu_div (cupy_ops/torch_ops.py).
"""
from __future__ import annotations

import torch

from .elementwise import Elementwise

KERNEL = Elementwise("relu_backward.cu", "relu_backward")   # binary: (grad, ref) -> out


def relu_backward(grad: torch.Tensor, ref: torch.Tensor, scale: float = 1.0, flip: bool = False) -> torch.Tensor:
    """``0 where masked(ref) else grad * scale``, as torch's threshold_backward (then a multiply).

    Args:
        grad: CUDA tensor, the incoming gradient.
        ref: tensor of ``grad``'s shape, dtype and device deciding the mask: masked where
            ``ref <= 0`` (or ``ref >= 0`` with ``flip``); NaN is never masked.
        scale: multiplies the gradient (1 / divisor for relu_div).
    Returns:
        A contiguous tensor of ``grad``'s shape and dtype.
    """
    grad = grad.contiguous()
    ref = ref.contiguous()
    out = torch.empty_like(grad)
    KERNEL.launch((grad, ref, out), (scale, int(flip)), grad.get_device())
    return out
