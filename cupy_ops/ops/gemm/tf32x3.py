"""tf32x3: float32 at fp32 accuracy on the Hopper TF32 tensor cores (gemm_tf32x3.cuh, sm_90a):
each operand split into a TF32 hi and lo in shared memory and registers, three products per
k-step (a_lo b_hi + a_hi b_lo + a_hi b_hi), partial sums promoted to fp32 registers every 2
k-tiles; 128 x 128 tiles, split-K up to half a wave; a row-major B as C^T = B^T A^T. Where the
cost model says so (``presplit_saves``), A is split by a pass first (``tf32x3_split_a``, the same
bits) and the kernel loads its hi and lo (``gemm_tf32x3_swap_pre``; a K-major B, a Linear's
weight, as C^T too: ``gemm_tf32x3_swapk_pre``). Taken by name only ("auto" follows torch's
precision switches); its error model: docs/numerics.md.
"""

from __future__ import annotations

import torch

from ... import launch
from . import geometry, tma
from .common import (
    EPILOGUES,
    Device,
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
from .hopper import b_side, launch_maps, run_hopper, swapped_a_map, swaps
from .runtime import SM90A, declare, handle, prepare
from .tables import (
    X3_DEFAULT_BANDWIDTH,
    X3_MACS_PER_US,
    X3_PRESPLIT_BYTES,
    X3_PRESPLIT_SHARE,
    X3_PRESPLIT_US,
    X3_SPLIT_MAX_WAVES,
)

NAME = "tf32x3"
SPLIT_A = "tf32x3_split_a"  # the pass that splits A (the _pre kernels')


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


def presplit_saves(M: int, N: int, K: int, dev: Device, swap: bool = False) -> float:
    """The microseconds splitting A by a pass saves an M x K x N GEMM (negative: what it costs),
    ``swap``: computed as C^T = B^T A^T. Without it every column tile's CTAs split the same A
    rows in the kernel; with it the main loop runs at X3_MACS_PER_US["tf32x3 presplit"] ("tf32x3
    swap presplit"), after a pass that reads A and writes its hi and lo (X3_PRESPLIT_BYTES an
    element) at X3_PRESPLIT_SHARE of the bandwidth and its launch (X3_PRESPLIT_US). So it pays
    where N is wide: the pass costs M K, the saving M N K."""
    work = M * N * K
    rate = X3_MACS_PER_US[NAME + (" swap presplit" if swap else " presplit")]
    saved = work / X3_MACS_PER_US[NAME] - work / rate
    bw = dev.bandwidth or X3_DEFAULT_BANDWIDTH
    return saved - X3_PRESPLIT_BYTES * M * K / (X3_PRESPLIT_SHARE * bw) - X3_PRESPLIT_US


def swapped(N: int, dtype, b: Matrix, ov) -> bool:
    """Whether this family's plan may compute C^T = B^T A^T (``plan``'s rule: any B whose C^T
    fits the grid, a K-major one where A is split by a pass; the cost model's guess before a
    family is chosen)."""
    return cdiv(N, geometry.WG_BM) <= geometry.MAX_GRID_Y and ov.swap is not False


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
    nmajor = fits and swaps(N, dtype, b, None if ov.swap else ov.swap, c_map=False)
    # a K-major B^T (a Linear's weight, or b.T transposed) through the registers too where A's
    # pieces come from the pass: then B's split is the consumers' alone, no b_lo slots
    kswap = fits and not nmajor and ov.swap is not False
    presplit = ov.presplit if ov.presplit is not None else presplit_saves(M, N, K, dev, swapped(N, dtype, b, ov)) > 0
    if ov.swap and kswap and not presplit:
        raise ValueError("swap=True with a K-major b takes A split by a pass for algo='tf32x3'; got presplit=False")
    swap = nmajor or (kswap and presplit)
    pa, pb = kmajor_operand(a), Operand("n-major", False, b.stride0) if nmajor else kmajor_operand(b.T)
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
        presplit=presplit,
    )
    name = "gemm_tf32x3" + ("_swap" if nmajor else "_swapk" if swap else "") + ("_pre" if presplit else "")
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
    for name in ("gemm_tf32x3", "gemm_tf32x3_swap", "gemm_tf32x3_pre", "gemm_tf32x3_swap_pre", "gemm_tf32x3_swapk_pre"):
        exprs += [f"{name}<{bn}, {e}>" for bn in geometry.X3_TILE_NS for e in EPILOGUES]
        exprs += [f"{name}_partial<{bn}>" for bn in geometry.X3_TILE_NS]
    return {SM90A: exprs + [SPLIT_A]}


KERNELS = declare(variants())


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    if not p.presplit:
        run_hopper(KERNELS, p, a, b, c, epi)
        return
    M, K = a.shape
    dev = c.get_device()
    a2 = prepare(a, p.a)
    # hi then lo, (M, K) in rows of ldw: 16-byte aligned, as their maps need
    ldw = cdiv(K, 4) * 4
    ws = torch.empty((2, M, ldw), dtype=torch.float32, device=c.device)
    hi, lo = ws[0], ws[1]
    groups = cdiv(K, 4)
    launch.launch(
        handle(KERNELS, SPLIT_A, dev),
        (cdiv(groups, geometry.X3_PRESPLIT_THREADS), min(M, geometry.MAX_GRID_Y), 1),
        (geometry.X3_PRESPLIT_THREADS, 1, 1),
        (a2.data_ptr(), a2.stride(0), hi.data_ptr(), lo.data_ptr(), ldw, M, K),
    )
    # A's pieces: the kernel's A side (boxes of its rows), or, swapped, its B side (boxes of its columns)
    rows = p.tile[1] // p.cluster if p.swap else p.tile[0]
    ahi, alo = (tma.tensor_map(t, K, M, ldw, p.bk, rows, exact=True) for t in (hi, lo))
    if p.swap and p.b.prep == "n-major":  # B (row-major) the kernel's A side, as run_hopper's maps
        keep = b
        maps = (swapped_a_map(p, b), ahi, alo)
    elif p.swap:  # B^T (K-major) the kernel's A side, in boxes of its 128 rows
        keep = prepare(b.t(), p.b)
        maps = (tma.tensor_map(keep, K, b.shape[1], p.b.ld, p.bk, geometry.WG_BM, exact=True), ahi, alo)
    else:
        b_map, keep = b_side(p, b)
        maps = (ahi, alo, b_map)
    launch_maps(KERNELS, p, maps, c, K, epi)
    del keep, a2, ws  # launched: the stream orders any reuse of this memory after the kernel
