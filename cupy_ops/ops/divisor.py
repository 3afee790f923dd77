"""The divisor of relu_div / linear_relu_div, turned into what the kernels take."""
from __future__ import annotations

import numpy as np
import torch

from .. import checks
from ..dtypes import compute_dtype

_scales: dict[tuple, float] = {}


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


def parse(divisor, x: torch.Tensor, device: int, *, cuda_ok: bool = True, context: str = ""):
    """Check ``divisor`` (``checks.divisor``) for an output like ``x``; return
    ``(scale, device_divisor)``.

    A Python or numpy number, or a one-element CPU tensor, gives a host ``scale`` and
    ``device_divisor=None``. A one-element CUDA tensor on ``x``'s device gives a one-element
    tensor in the compute type (cast through ``x``'s dtype, as torch casts it) that the kernel
    divides by; nothing is read back to the host.
    """
    checks.divisor(divisor, device, cuda_ok=cuda_ok, context=context)
    if isinstance(divisor, torch.Tensor):
        if not divisor.is_cuda:
            return scale_for(divisor.item(), x.dtype), None
        return scale_for(1.0, x.dtype), divisor.reshape(()).to(x.dtype).to(compute_dtype(x.dtype))
    return scale_for(divisor, x.dtype), None


def number(divisor, context: str) -> float:
    """A divisor that must reach a custom op as a number (a real number or a one-element CPU
    tensor; ``context`` says why), after ``checks.divisor``: its value as a float."""
    checks.divisor(divisor, -1, cuda_ok=False, context=context)
    return float(divisor.item() if isinstance(divisor, torch.Tensor) else divisor)
