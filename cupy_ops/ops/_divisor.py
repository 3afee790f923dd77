"""The divisor argument of relu_div / linear_relu_div, turned into what the kernels take."""
from __future__ import annotations

import numbers

import numpy as np
import torch

_scales: dict[tuple, object] = {}


def scale_for(divisor, dtype: torch.dtype) -> float:
    """Host-side reciprocal of a numeric ``divisor``, rounded exactly as torch rounds it.

    torch evaluates ``t / d`` for a Python number ``d`` as ``t * (1 / d)`` with the reciprocal
    taken on the host in the compute type: fp32 for float32, float16 and bfloat16 (``d`` is
    not rounded to the 16-bit dtype first: measured on an H100, torch 2.11), fp64 for float64.
    Returns that value as a Python float (exact in the compute type). Cached per (d, dtype).
    """
    key = (divisor, dtype)
    scale = _scales.get(key)
    if scale is None:
        d = float(divisor)
        with np.errstate(all="ignore"):
            if dtype == torch.float64:
                scale = 1.0 / d if d != 0.0 else float(np.float64(1.0) / np.float64(d))
            else:
                scale = float(np.float32(1.0) / np.float32(d))
        # 0.0 and -0.0 compare (and hash) equal but give +-inf: never cache zeros (or NaN).
        if d != 0.0 and d == d and len(_scales) < 4096:
            _scales[key] = scale
    return scale


def parse(divisor, x: torch.Tensor, device: int):
    """Validate ``divisor`` for an output like ``x``; return ``(scale, device_divisor)``.

    A Python or numpy number, or a one-element CPU tensor, gives a host ``scale`` and
    ``device_divisor=None``. A one-element CUDA tensor on ``x``'s device gives a one-element
    tensor in the compute type (cast through ``x``'s dtype, as torch casts it) that the kernel
    divides by; nothing is read back to the host.

    Raises:
        TypeError: not a number or tensor (a string, None, a bool, a complex number...).
        ValueError: a tensor with more than one element, or on another device.
    """
    if isinstance(divisor, torch.Tensor):
        if divisor.numel() != 1:
            raise ValueError(f"divisor must be a number or a one-element tensor, got a tensor of shape {tuple(divisor.shape)}")
        if divisor.is_complex() or divisor.dtype == torch.bool:
            raise TypeError(f"divisor must be a real number, got a tensor of dtype {divisor.dtype}")
        if not divisor.is_cuda:
            return scale_for(divisor.item(), x.dtype), None
        if divisor.get_device() != device:
            raise ValueError(f"divisor must be on the same device as x (cuda:{device}), got {divisor.device}")
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        return scale_for(1.0, x.dtype), divisor.reshape(()).to(x.dtype).to(compute)
    if isinstance(divisor, bool) or not isinstance(divisor, numbers.Real):
        raise TypeError(f"divisor must be a real number or a one-element tensor, got {type(divisor).__name__}")
    return scale_for(divisor, x.dtype), None
