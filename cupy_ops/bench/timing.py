"""GPU timing the KernelBench way (``cupy_ops.timing``: CUDA events, warm-up, L2 flush before
each run, median), and what the bench says when there is no GPU."""

from __future__ import annotations

import torch

from ..timing import L2_FLUSH_BYTES, Stats, time_cuda, time_cuda_interleaved

__all__ = ["L2_FLUSH_BYTES", "OFFLINE", "Stats", "gpu_problem", "time_cuda", "time_cuda_interleaved"]

# What works on a machine without a GPU: NVRTC compiles for any architecture on the CPU.
OFFLINE = (
    '`python -m cupy_ops compile --arch sm_90 [YOUR.cu]` (in Python `Kernel.compile_offline("sm_90")`) '
    "compiles the kernels and reports their registers and spills"
)


def gpu_problem(offline: str = OFFLINE) -> str | None:
    """None when a CUDA GPU and CuPy are usable, else the line to print: "error: " and one
    sentence saying what is missing (and, without a GPU, ``offline``: what still works)."""
    if not torch.cuda.is_available():
        return (
            "error: no usable CUDA GPU: torch.cuda.is_available() is False on this machine, "
            f"and cupy_ops kernels run only on NVIDIA GPUs; without one, {offline}."
        )
    try:
        import cupy  # noqa: F401
    except ImportError as exc:
        return (
            f"error: CuPy is not importable ({exc}); install cupy_ops with the extra matching your CUDA, "
            'e.g. pip install -e ".[cuda12]" or ".[cuda13]".'
        )
    return None
