"""tf32x3: float32 at fp32 accuracy on the Hopper TF32 tensor cores (gemm_tf32x3.cuh, sm_90a):
each operand split into a TF32 hi and lo in shared memory and registers, three products per
k-step (a_lo b_hi + a_hi b_lo + a_hi b_hi), partial sums promoted to fp32 registers every 2
k-tiles; 128 x 128 tiles, split-K up to half a wave; a row-major B as C^T = B^T A^T. Taken by
name only ("auto" follows torch's precision switches); its error model: docs/numerics.md.
"""

from __future__ import annotations

import torch

from . import geometry
from .common import (
    EPILOGUES,
    GemmPlan,
    Matrix,
    Operand,
    cdiv,
    kmajor_operand,
    needs_hopper,
    reduce_grid,
    split,
    tiled_sizes,
)
from .hopper import run_hopper, swaps
from .runtime import SM90A, declare
from .tables import X3_SPLIT_MAX_WAVES

NAME = "tf32x3"


def supports(M: int, N: int, K: int, dtype, dev) -> str | None:
    return (
        tiled_sizes(M, N, K)
        or (
            None
            if dtype == torch.float32
            else f"is the fp32 kernel on TF32 tensor cores (three products); takes float32 operands, got {dtype}"
        )
        or needs_hopper(NAME, dev, "simt (fp32 on the CUDA cores)")
    )


def plan(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, ov) -> GemmPlan:
    if ov.tile_n not in (None,) + geometry.X3_TILE_NS:  # an override this family cannot honour
        raise ValueError(f"tile_n must be one of {geometry.X3_TILE_NS} for algo='tf32x3', got {ov.tile_n!r}")
    bk, bn = geometry.WG_BK[torch.float32], geometry.X3_TILE_NS[0]
    # TF32 reads shared memory K-major only: a row-major b as C^T = B^T A^T (B^T through the
    # registers, as the A fragments are anyway), else b.T transposed; C^T's row tiles are the
    # grid's y dimension, so N past MAX_GRID_Y tiles takes the transpose
    fits = cdiv(N, geometry.WG_BM) <= geometry.MAX_GRID_Y
    if ov.swap and not fits:
        raise ValueError(
            f"swap=True takes N up to {geometry.MAX_GRID_Y * geometry.WG_BM} for algo='tf32x3' (C^T's row tiles "
            f"are the grid's y dimension), got N = {N}"
        )
    swap = fits and swaps(N, dtype, b, ov.swap, c_map=False)
    pa, pb = kmajor_operand(a), Operand("n-major", False, b.stride0) if swap else kmajor_operand(b.T)
    kM, kN = (N, M) if swap else (M, N)  # the kernel's output: C^T when swapped
    slices, kslice = split(kM, kN, K, bn, bk, dev.sm_count, X3_SPLIT_MAX_WAVES) if ov.split_k else (1, K)
    common = dict(
        grid=(cdiv(kN, bn), cdiv(kM, geometry.WG_BM), slices),
        block=(geometry.WG_THREADS, 1, 1),
        smem=geometry.X3_SMEM_BYTES,
        a=pa,
        b=pb,
        tile=(geometry.WG_BM, bn),
        bk=bk,
        swap=swap,
    )
    name = "gemm_tf32x3_swap" if swap else "gemm_tf32x3"
    if slices > 1:
        return GemmPlan(
            NAME,
            f"{name}_partial<{bn}>",
            SM90A,
            slices=slices,
            kslice=kslice,
            reduce=f"gemm_splitk_reduce<float, {epi}>",
            reduce_grid=reduce_grid(M * N),
            **common,
        )
    return GemmPlan(NAME, f"{name}<{bn}, {epi}>", SM90A, kslice=K, **common)


def variants() -> dict[str, list[str]]:
    exprs = []
    for name in ("gemm_tf32x3", "gemm_tf32x3_swap"):
        exprs += [f"{name}<{bn}, {e}>" for bn in geometry.X3_TILE_NS for e in EPILOGUES]
        exprs += [f"{name}_partial<{bn}>" for bn in geometry.X3_TILE_NS]
    return {SM90A: exprs}


KERNELS = declare(variants())


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    run_hopper(KERNELS, p, a, b, c, epi)
