"""relu_div: ``torch.relu(x) / divisor`` fused in one pass (cuda_src/relu_div.cu)."""
from __future__ import annotations

import torch

from .. import compiler, launch
from . import _divisor, _elementwise

SOURCE = "relu_div.cu"
EXPRS = {dt: f"relu_div<{name}>" for dt, name in launch.DTYPE_NAMES.items()}
compiler.register(SOURCE, EXPRS.values())


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
        RuntimeError: ``out`` requires grad.
    """
    args, keep = _args(x, divisor)
    y = _elementwise.run(SOURCE, EXPRS, x, out, args, "relu_div")
    del keep  # the device divisor (if any) lived until the launch was queued on the stream
    return y


def relu_div_(x: torch.Tensor, divisor) -> torch.Tensor:
    """In-place ``relu_div``: overwrites and returns ``x`` (same arguments and errors)."""
    args, keep = _args(x, divisor)
    y = _elementwise.run(SOURCE, EXPRS, x, x, args, "relu_div")
    del keep
    return y


def _args(x, divisor) -> tuple[tuple, torch.Tensor | None]:
    """Kernel arguments for ``divisor`` and the device tensor they point into (if any)."""
    launch.check_tensor("x", x)
    device = launch.check_cuda("x", x)
    scale, on_device = _divisor.parse(divisor, x, device)
    return (scale, 0 if on_device is None else on_device.data_ptr()), on_device
