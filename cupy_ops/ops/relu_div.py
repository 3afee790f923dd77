"""relu_div: ``torch.relu(x) / divisor`` fused in one pass (cuda_src/relu_div.cu)."""
from __future__ import annotations

import torch

from .. import checks
from . import divisor as _divisor
from .elementwise import Elementwise

# extra kernel arguments: scale (in the compute type), pointer to a GPU divisor or null
KERNEL = Elementwise("relu_div.cu", "relu_div")


def relu_div(x: torch.Tensor, divisor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x) / divisor`` in one kernel, bit for bit as torch computes it.

    Args:
        x: CUDA tensor of any shape, float32 / float16 / bfloat16 / float64, any strides.
        divisor: a real number, or a one-element tensor (CPU, or CUDA on ``x``'s device).
            0, inf and NaN are allowed and give what torch gives (e.g. ``relu(x) / 0``).
        out: optional tensor of ``x``'s shape, dtype and device to write into.
    Returns:
        A tensor of ``x``'s shape and dtype (``out`` when given).
    Raises:
        TypeError: ``x``/``out`` not a tensor or of a wrong dtype; ``divisor`` not a number.
        ValueError: ``x`` not on CUDA; ``out`` or ``divisor`` of a wrong shape or device.
        RuntimeError: as torch: ``out`` partially overlaps ``x`` or the divisor, or repeats
            elements; ``out=`` with an input that requires grad (grad mode on).
    """
    device = checks.cuda_tensor("x", x)
    scale, on_device = _divisor.parse(divisor, x, device)
    # on_device (a GPU divisor, if any) stays referenced until the launch is queued
    return KERNEL(x, out, (scale, 0 if on_device is None else on_device.data_ptr()), device,
                  (divisor,) if on_device is not None else ())


def relu_div_(x: torch.Tensor, divisor) -> torch.Tensor:
    """In-place ``relu_div``: overwrites and returns ``x`` (same arguments and errors)."""
    device = checks.cuda_tensor("x", x)
    scale, on_device = _divisor.parse(divisor, x, device)
    return KERNEL(x, x, (scale, 0 if on_device is None else on_device.data_ptr()), device,
                  (divisor,) if on_device is not None else ())
