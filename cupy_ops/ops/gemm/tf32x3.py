"""tf32x3: float32 at fp32 accuracy on the Hopper TF32 tensor cores (gemm_tf32x3.cuh, sm_90a):
each operand split into a TF32 hi and lo in shared memory and registers, three products per
k-step (a_lo b_hi + a_hi b_lo + a_hi b_hi), partial sums promoted to fp32 registers every 2
k-tiles; 128 x 128 tiles, split-K up to half a wave; a row-major B as C^T = B^T A^T. Where the
cost model says so (``presplit_saves``), A is split by a pass first (``tf32x3_split_a``, the same
bits) and the kernel loads its hi and lo (``gemm_tf32x3_swap_pre``; a K-major B, a Linear's
weight, as C^T too: ``gemm_tf32x3_swap_pre<128, true, ...>``). Taken by name only ("auto" follows torch's
precision switches); its error model: docs/numerics.md.
"""

from __future__ import annotations

import torch

from ... import launch
from ...kernel.types import template_arg
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
from .hopper import swapped_a_map, swaps
from .runtime import SM90A, declare, handle, launch_steps, prepare, reduce_step, split_workspace
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


def swapped(N: int, ov) -> bool:
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
    presplit = ov.presplit if ov.presplit is not None else presplit_saves(M, N, K, dev, swapped(N, ov)) > 0
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
    name, kmajor = kernel_name(swap, presplit), (template_arg(not nmajor),) if swap and presplit else ()
    if slices > 1:
        return GemmPlan(
            NAME,
            f"{name}_partial<{', '.join((str(bn), *kmajor))}>",
            SM90A,
            slices=slices,
            kslice=kslice,
            reduce=f"gemm_splitk_reduce<float, {epi}>",
            reduce_grid=reduce_grid(M * N),
            **common,
        )
    return GemmPlan(NAME, f"{name}<{', '.join((str(bn), *kmajor, epi))}>", SM90A, kslice=K, **common)


def kernel_name(swap: bool, presplit: bool) -> str:
    """The kernel template of a plan: computed as C^T (``swap``), A split by a pass first
    (``presplit``); the swapped one with A's pieces takes B^T's layout as its second template
    argument (``KMAJOR``: a K-major B, a Linear's weight, where false is a row-major one's)."""
    return "gemm_tf32x3" + ("_swap" if swap else "") + ("_pre" if presplit else "")


def variants() -> dict[str, list[str]]:
    exprs = []
    for swap in (False, True):
        for presplit in (False, True):
            name = kernel_name(swap, presplit)
            for layout in (("false",), ("true",)) if swap and presplit else ((),):
                for bn in geometry.X3_TILE_NS:
                    exprs += [f"{name}<{', '.join((str(bn), *layout, e))}>" for e in EPILOGUES]
                    exprs.append(f"{name}_partial<{', '.join((str(bn), *layout))}>")
    return {SM90A: exprs + [SPLIT_A]}


KERNELS = declare(variants())


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    """C = epilogue(A @ B) by plan ``p``: the operands prepared as planned, then ``_steps``."""
    a2 = prepare(a, p.a)
    b2 = b if p.b.prep == "n-major" else prepare(b.t(), p.b)  # B row-major, or B^T K-major
    ws, part = _workspaces(p, a.shape[0], a.shape[1], c)
    for step in _steps(p, a2, b2, c, epi, ws, part):
        launch.launch(*step)
    del a2, b2, ws, part  # launched: the stream orders any reuse of this memory after the kernels


def launcher(p: GemmPlan, device: int):
    """``run`` of plan ``p`` bound to ``device`` (``planner.launcher_for``): where the operands
    are read as they are (A K-major; B row-major, or K-major as a Linear's ``weight.T``), a
    call allocates the workspaces and launches the steps, whose arguments (the tensor maps
    among them) are packed once per address set (A, B, C, the workspaces, the epilogue's).
    Other plans run ``run`` as it is."""
    if p.a.prep != "as is" or p.b.prep not in ("as is", "n-major"):
        return lambda a, b, c, epi: run(p, a, b, c, epi)
    by_address: dict[tuple, list] = {}
    n_major = p.b.prep == "n-major"

    def go(a, b, c, epi):
        b2 = b if n_major else b.t()
        ws, part = _workspaces(p, a.shape[0], a.shape[1], c)
        spaces = tuple(0 if t is None else t.data_ptr() for t in (ws, part))
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), spaces, epi[2])
        launch_steps(by_address, key, lambda: _steps(p, a, b2, c, epi, ws, part))
        # launched: the stream orders any reuse of the workspaces' memory after the kernels

    return go


def _workspaces(p: GemmPlan, M: int, K: int, c):
    """``(ws, part)``: A's hi then lo, (2, M, ldw) rows 16-byte aligned as their maps need, where
    A is split by a pass; split-K's fp32 partial sums (slices, M, N). None where not needed."""
    ws = torch.empty(2, M, cdiv(K, 4) * 4, dtype=torch.float32, device=c.device) if p.presplit else None
    part = split_workspace(p, c) if p.slices > 1 else None
    return ws, part


def _steps(p: GemmPlan, a, b2, c, epi: tuple, ws, part) -> list:
    """The launches (``(handle, grid, block, args, shared memory)``) of plan ``p``: A's split
    into ``ws`` where planned, then the kernel over the tensor maps (A or its pieces; ``b2``: B
    (K, N) row-major where read N-major, else B^T (N, K) K-major), into C or split-K's ``part``
    and its reduction. ``a`` and ``b2`` as prepared (``runtime.prepare``)."""
    M, K = a.shape
    N = c.shape[1]
    dev = c.get_device()
    steps = []
    if ws is not None:
        ldw = ws.shape[2]
        sides, ld = (ws[0], ws[1]), ldw
        steps.append(
            (
                handle(KERNELS, SPLIT_A, dev),
                (cdiv(cdiv(K, 4), geometry.X3_PRESPLIT_THREADS), min(M, geometry.MAX_GRID_Y), 1),
                (geometry.X3_PRESPLIT_THREADS, 1, 1),
                (a.data_ptr(), a.stride(0), ws[0].data_ptr(), ws[1].data_ptr(), ldw, M, K),
                0,
            )
        )
    else:
        sides, ld = (a,), p.a.ld
    # A (or its pieces) is the kernel's A side (boxes of its tile's rows), or, swapped, its B side
    # (of its tile's columns); B^T the other, from a row-major B in the swapped boxes
    rows_a, rows_b = (p.tile[1], p.tile[0]) if p.swap else (p.tile[0], p.tile[1])
    a_maps = tuple(tma.tensor_map(t, K, M, ld, p.bk, rows_a, exact=True) for t in sides)
    bt_map = (
        swapped_a_map(p, b2) if p.b.prep == "n-major" else tma.tensor_map(b2, K, N, p.b.ld, p.bk, rows_b, exact=True)
    )
    maps = (bt_map, *a_maps) if p.swap else (*a_maps, bt_map)
    h = handle(KERNELS, p.kernel, dev)
    if part is not None:
        steps.append((h, p.grid, p.block, (*maps, part.data_ptr(), M, N, K, p.kslice), p.smem))
        steps.append(reduce_step(p, part.data_ptr(), c, epi))
    else:
        steps.append((h, p.grid, p.block, (*maps, c.data_ptr(), N, M, N, K, *epi), p.smem))
    return steps
