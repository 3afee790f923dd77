"""The element types the kernels take: torch dtype -> the type name of the kernels' templates
(cuda_src/common.cuh), and the type their arithmetic runs in."""

from __future__ import annotations

import torch

CUDA_NAMES: dict[torch.dtype, str] = {
    torch.float32: "float",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "double",  # for gradient checks; not a speed target
}
SUPPORTED: tuple[torch.dtype, ...] = tuple(CUDA_NAMES)
SUPPORTED_TEXT = "float32, float16, bfloat16 or float64"


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the kernels compute in for ``dtype``: fp64 for float64, fp32 for the rest."""
    return torch.float64 if dtype == torch.float64 else torch.float32
