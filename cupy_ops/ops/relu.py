"""relu: ``torch.relu`` as a cupy_ops kernel (cuda_src/relu.cu)."""
from __future__ import annotations

import torch

from .. import checks
from .elementwise import Elementwise

KERNEL = Elementwise("relu.cu", "relu")


def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """ReLU, exactly as ``torch.relu(x)``: NaN stays NaN, -0.0 and negatives give +0.0.

    Args:
        x: CUDA tensor of any shape, float32 / float16 / bfloat16 / float64, any strides.
        out: optional tensor of ``x``'s shape, dtype and device to write into.
    Returns:
        A tensor of ``x``'s shape and dtype (``out`` when given).
    Raises:
        TypeError: ``x`` or ``out`` is not a tensor, or has an unsupported or mismatched dtype.
        ValueError: ``x`` is not on a CUDA device, or ``out`` has another shape or device.
        RuntimeError: as torch: ``out`` partially overlaps ``x`` or repeats elements; ``out=``
            with an input that requires grad (grad mode on).
    """
    return KERNEL(x, out, (), checks.cuda_tensor("x", x))


def relu_(x: torch.Tensor) -> torch.Tensor:
    """In-place ``relu``: overwrites and returns ``x`` and bumps its version counter (so autograd
    refuses a backward that saved the old values, as after torch's ``relu_``). A leaf that
    requires grad is refused with torch's message; other tensors that require grad are refused
    (cupy_ops does not record in-place ops in the graph)."""
    return KERNEL(x, x, (), checks.cuda_tensor("x", x))
