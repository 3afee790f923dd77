"""Shared by the matrix ops (matmul, linear_relu_div): validation, operand layouts, algorithm
choice."""
from __future__ import annotations

import torch

from .. import launch

ALGOS = ("auto", "naive", "simt")
SIMT_TILE = 128          # block tile of gemm_simt.cuh (M and N)
SIMT_THREADS = 256
SIMT_KTILES = (8, 16)    # compiled k-tile variants
SIMT_KTILE = 16          # the one used (tuning: notes/gemm_tuning.md)


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


def tf32_allowed() -> bool:
    """Whether torch would use TF32 for an fp32 matmul now (the same switches torch reads)."""
    return torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"


def choose(algo: str, dtype: torch.dtype, M: int) -> str:
    """The kernel family for ``algo``: "auto" picks the fastest correct one available."""
    if algo != "auto":
        if algo == "simt" and dtype != torch.float32:
            raise ValueError(f"algo='simt' is the fp32 kernel; got {dtype} operands (use 'auto' or 'naive')")
        return algo
    if dtype == torch.float32 and launch.cdiv(M, SIMT_TILE) <= 65535:
        return "simt"
    return "naive"


def operand(t: torch.Tensor, major_dim: int):
    """Layout of a matrix operand for the tiled kernels: ``(t, major, ld, vec)``.

    ``major`` is True when ``t`` is contiguous along dimension ``major_dim`` (then element
    (i, j) sits at ``i * ld + j`` if major_dim == 1, ``j * ld + i`` if major_dim == 0); False
    when contiguous along the other dimension. A view contiguous along neither is copied once
    (O(size) work next to the O(M N K) product). ``vec``: 16-byte loads are allowed.
    """
    other = 1 - major_dim
    if t.stride(major_dim) == 1 or t.shape[major_dim] == 1:
        major, ld = True, t.stride(other) if t.shape[other] > 1 else t.shape[major_dim]
    elif t.stride(other) == 1 or t.shape[other] == 1:
        major, ld = False, t.stride(major_dim) if t.shape[major_dim] > 1 else t.shape[other]
    else:  # row-major copy: contiguous along dimension 1
        t = t.contiguous()
        major, ld = major_dim == 1, t.stride(0)
    vec = t.data_ptr() % 16 == 0 and ld % 4 == 0
    return t, major, ld, vec


def simt_grid(M: int, N: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    return (launch.cdiv(N, SIMT_TILE), launch.cdiv(M, SIMT_TILE), 1), (SIMT_THREADS, 1, 1)


def bool_str(b: bool) -> str:
    return "true" if b else "false"
