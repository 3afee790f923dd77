"""Validation shared by the matrix ops (matmul, linear_relu_div)."""
from __future__ import annotations

import torch

from .. import launch

ALGOS = ("naive",)


def check_algo(algo) -> str:
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {', '.join(map(repr, ALGOS))}, got {algo!r}")
    return algo


def check_matrix(name: str, t, ref_name: str | None = None, ref: torch.Tensor | None = None) -> None:
    """``t`` is a 2-D tensor of a supported dtype (and of ``ref``'s dtype when given)."""
    launch.check_tensor(name, t)
    if ref is not None:
        launch.check_same_dtype(name, t, ref_name, ref)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor, got {t.dim()}-D with shape {tuple(t.shape)}")
