"""The divisor of relu_div / linear_relu_div, turned into what the kernels take.

torch's rule for ``t / d`` on a CUDA tensor ``t`` (measured on an H200, torch 2.11, over 419
divisors log-uniform in 1e-30..1e30 of both signs plus 0, +-inf, NaN and subnormals;
docs/numerics.md#the-divisor):

- ``d`` a Python float or int, a numpy scalar, or a 0-dim CPU tensor of any dtype: torch
  multiplies by the reciprocal of ``d``'s value taken in double and rounded to the compute
  type (fp32 for float32 / float16 / bfloat16, fp64 for float64): ``x * fp32(1 / double(d))``.
  Every divisor of every kind agreed (the fp32 reciprocal of fp32(d) missed 126 of 419).
- ``d`` a CUDA tensor: true division, ``d`` cast to the result dtype first.
- A CPU tensor of one or more dimensions is refused ("Expected all tensors to be on the same
  device"); a CUDA tensor of several dimensions broadcasts the result to its rank; the result
  dtype is ``torch.result_type(x, d)`` (float64 for a float16 x of one dimension and a (1,)
  float64 CUDA divisor).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
import torch

from ..dtypes import compute_dtype

_scales: dict[tuple, float] = {}


def scale_for(divisor, dtype: torch.dtype) -> float:
    """The multiplier torch uses for ``t / divisor`` (a number) with ``t`` of ``dtype``:
    ``1 / divisor`` taken in double, rounded to fp32 unless ``dtype`` is float64 (+-inf for
    +-0, NaN for NaN, subnormal where it falls there: nothing is flushed). Returns it as a
    Python float (exact in the compute type). Cached per (divisor, dtype)."""
    key = (divisor, dtype)
    scale = _scales.get(key)
    if scale is None:
        d = float(divisor)
        recip = 1.0 / d if d != 0.0 else math.copysign(math.inf, d)
        scale = recip if dtype == torch.float64 else ctypes.c_float(recip).value  # C's rounding: to nearest
        # 0.0 and -0.0 compare (and hash) equal but give +-inf: never cache zeros (or NaN).
        if d != 0.0 and d == d and len(_scales) < 4096:
            _scales[key] = scale
    return scale


def traced(divisor):
    """A divisor as torch.compile hands it to an op: dynamo makes a numpy scalar a 0-dim tensor
    (a graph input; torch's own ``t / d`` divides by it so), which no op's number argument takes:
    it goes the tensor divisor's way. Anything else unchanged."""
    # (dynamo answers isinstance(d, np.ndarray) for a numpy scalar, np.generic eagerly)
    return torch.as_tensor(divisor) if isinstance(divisor, (np.generic, np.ndarray)) else divisor


def result(x: torch.Tensor, divisor) -> tuple[torch.dtype, torch.Size]:
    """The dtype and shape of ``torch.relu(x) / divisor`` (a checked divisor): ``x``'s own
    unless the divisor is a tensor that promotes the dtype or broadcasts to more dimensions."""
    if not isinstance(divisor, torch.Tensor):
        return x.dtype, x.shape
    shape = x.shape if divisor.dim() <= x.dim() else torch.Size((1,) * (divisor.dim() - x.dim()) + tuple(x.shape))
    return torch.result_type(x, divisor), shape


def parse(divisor, x: torch.Tensor):
    """``(scale, device_divisor)`` of a divisor already checked by ``checks.divisor``, for an
    output like ``x``.

    A number, or a 0-dim CPU tensor, gives the host ``scale`` (``scale_for`` of its value) and
    ``device_divisor=None``. A one-element CUDA tensor on ``x``'s device gives a 0-dim tensor
    in the compute type, cast through ``x``'s dtype as torch casts it, that the kernel divides
    by; nothing is read back to the host.
    """
    if isinstance(divisor, torch.Tensor):
        if not divisor.is_cuda:
            return scale_for(divisor.item(), x.dtype), None
        return scale_for(1.0, x.dtype), divisor.reshape(()).to(x.dtype).to(compute_dtype(x.dtype))
    return scale_for(divisor, x.dtype), None
