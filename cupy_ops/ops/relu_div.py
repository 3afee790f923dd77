"""relu_div: ``torch.relu(x) / divisor`` fused in one pass (cuda_src/relu_div.cu)."""
from __future__ import annotations

import torch

from .. import checks
from . import divisor as _divisor
from .elementwise import Elementwise

# extra kernel arguments: scale (in the compute type), pointer to a GPU divisor or null
KERNEL = Elementwise("relu_div.cu", "relu_div")


def _run(x, out, divisor, device):
    scale, on_device = _divisor.parse(divisor, x)
    # on_device (a GPU divisor, if any) stays referenced until the launch is queued
    return KERNEL(x, out, (scale, 0 if on_device is None else on_device.data_ptr()), device,
                  (divisor,) if isinstance(divisor, torch.Tensor) else ())


def relu_div(x: torch.Tensor, divisor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x) / divisor`` in one kernel, bit for bit as torch computes it.

    Args:
        x: CUDA tensor of any shape, float32 / float16 / bfloat16 / float64, any strides.
        divisor: a real number (Python or numpy), a 0-dim CPU tensor, or a one-element CUDA
            tensor on ``x``'s device. 0, inf and NaN give what torch gives (e.g. ``relu(x) / 0``).
            A number or CPU tensor is applied as torch does, by multiplying with its reciprocal
            (taken in double, rounded to the compute type); a CUDA tensor divides truly.
        out: optional tensor of ``x``'s shape, dtype and device to write into.
    Returns:
        A tensor of ``x``'s shape and dtype (``out`` when given) -- or, as torch gives it, of
        ``torch.result_type(x, divisor)`` and the broadcast shape when a divisor tensor promotes
        the dtype (a 0-dim ``x``, or a CUDA divisor with dimensions) or has more dimensions.
    Raises:
        TypeError: ``x``/``out`` not a tensor or of a wrong dtype; ``divisor`` not a real number.
        ValueError: ``x`` not on CUDA; ``out`` of a wrong shape or device; ``divisor`` with
            several elements, on another GPU, a CPU tensor with dimensions, an int past int64.
        RuntimeError: as torch: ``out`` partially overlaps ``x`` or the divisor, or repeats
            elements; ``out=`` with an input that requires grad (grad mode on).

    Example:
        >>> y = cupy_ops.relu_div(torch.randn(4096, device="cuda"), 2.0)
    """
    device = checks.cuda_tensor("x", x)
    checks.divisor(divisor, device)
    if isinstance(divisor, torch.Tensor):
        dtype, shape = _divisor.result(x, divisor)
        if dtype != x.dtype or shape != x.shape:
            # torch computes in the promoted dtype and broadcasts: so do we (a rare path)
            y = _run(x.to(dtype), None, divisor, device).reshape(shape)
            if out is None:
                return y
            checks.out(out, y, device, "relu_div", (x, divisor))
            return out.copy_(y)
    return _run(x, out, divisor, device)


def relu_div_(x: torch.Tensor, divisor) -> torch.Tensor:
    """In-place ``relu_div``: overwrites and returns ``x`` (same arguments and errors). A
    divisor tensor that promotes the dtype is applied in the promoted dtype and the result
    cast back, as torch's ``x.relu_().div_(divisor)`` does; one that would broadcast ``x`` to
    more dimensions is a RuntimeError, as in torch."""
    device = checks.cuda_tensor("x", x)
    checks.divisor(divisor, device)
    if isinstance(divisor, torch.Tensor):
        dtype, shape = _divisor.result(x, divisor)
        if shape != x.shape:
            raise RuntimeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape {list(shape)}")
        if dtype != x.dtype:
            checks.out(x, x, device, "relu_div", (divisor,))
            return x.copy_(_run(x.to(dtype), None, divisor, device))
    return _run(x, x, divisor, device)
