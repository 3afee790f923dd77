"""simt: the tiled fp32 GEMM on the CUDA cores (gemm_simt.cuh): 128 x 128 tiles, 8 x 8 outputs
a thread, operands read in place along either axis, split-K when the tiles leave SMs idle. What
"auto" takes for float32 while torch keeps TF32 off (its default)."""

from __future__ import annotations

from dataclasses import replace

import torch

from ... import launch
from ...kernel.types import template_arg
from . import geometry
from .common import (
    EPILOGUES,
    GemmPlan,
    Matrix,
    Operand,
    batch_aligned,
    cdiv,
    reduce_grid,
    tiled_sizes,
)
from .runtime import declare, handle, launch_entries, packed_launcher, reduce, split_workspace
from .tables import SIMT_OCCUPANCY, SIMT_SPLIT_MIN_K

NAME = "simt"


def supports(M: int, N: int, K: int, dtype, dev) -> str | None:
    if dtype != torch.float32:
        return tiled_sizes(M, N, K) or f"is the fp32 kernel; got {dtype} operands (use 'auto' or 'naive')"
    return tiled_sizes(M, N, K)


def occupancy(a_kmajor: bool, b_kmajor: bool, fused: bool, split: bool) -> tuple[int, bool]:
    """``(blocks per SM, tiles in dynamic shared memory)`` (tables.SIMT_OCCUPANCY)."""
    return (1, False) if split else SIMT_OCCUPANCY.get((a_kmajor, b_kmajor, fused), (1, False))


def kernel(a_kmajor: bool, b_kmajor: bool, epi: str, split: bool) -> tuple[str, int]:
    """The instantiation for these layouts and epilogue, and the dynamic shared memory its
    launch passes."""
    blocks, dyn = occupancy(a_kmajor, b_kmajor, epi != "EpiNone", split)
    return (
        f"gemm_simt<{template_arg(a_kmajor)}, {template_arg(b_kmajor)}, {epi}, {template_arg(split)}, {blocks}, "
        f"{template_arg(dyn)}>",
        geometry.SIMT_SMEM_BYTES if dyn else 0,
    )


def operand(t: Matrix) -> Operand:
    """An operand (rows, K-or-N) read along ``cols`` (K for A, N for B): contiguous along its
    columns (``kmajor`` for A / N-major for B), along its rows, or copied row-major."""
    if t.stride1 == 1 or t.cols == 1:
        major, ld, prep, aligned = True, t.stride0 if t.rows > 1 else t.cols, "as is", t.aligned16
    elif t.stride0 == 1 or t.rows == 1:
        major, ld, prep, aligned = False, t.stride1 if t.cols > 1 else t.rows, "as is", t.aligned16
    else:
        major, ld, prep, aligned = True, t.cols, "contiguous copy", True
    return Operand(prep, major, ld, aligned and ld % 4 == 0)


def split(M: int, N: int, K: int, sm_count: int) -> tuple[int, int]:
    """``(slices, kslice)``: split-K when the 128 x 128 tiles leave SMs idle (one block per
    SM): ``slices`` blocks per tile each multiply ``kslice`` values of K (a multiple of the
    k-tile) into an fp32 workspace, summed in order by the reduction. ``(1, K)``: no split."""
    tiles = cdiv(M, geometry.SIMT_TILE) * cdiv(N, geometry.SIMT_TILE)
    slices = min(sm_count // tiles, K // SIMT_SPLIT_MIN_K)
    if slices < 2:
        return 1, K
    kslice = cdiv(cdiv(K, slices), geometry.SIMT_BK) * geometry.SIMT_BK
    return cdiv(K, kslice), kslice


def plan(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, ov) -> GemmPlan:
    pa = operand(a)
    pb_ = operand(b)  # B (K, N): "major" = N-major (row-major)
    pb = Operand(pb_.prep, not pb_.kmajor, pb_.ld, pb_.vec)
    slices, kslice = split(M, N, K, dev.sm_count) if ov.split_k else (1, K)
    grid = (cdiv(N, geometry.SIMT_TILE), cdiv(M, geometry.SIMT_TILE), slices)
    block = (geometry.SIMT_THREADS, 1, 1)
    is_split = slices > 1
    name, smem = kernel(pa.kmajor, pb.kmajor, "EpiNone" if is_split else epi, is_split)
    if is_split:
        return GemmPlan(
            NAME,
            name,
            "gemm.cu",
            grid,
            block,
            smem,
            pa,
            pb,
            (geometry.SIMT_TILE, geometry.SIMT_TILE),
            slices,
            kslice,
            f"gemm_splitk_reduce<float, {epi}>",
            reduce_grid(M * N),
        )
    return GemmPlan(NAME, name, "gemm.cu", grid, block, smem, pa, pb, (geometry.SIMT_TILE, geometry.SIMT_TILE), 1, K)


def batched_kernel(a_kmajor: bool, b_kmajor: bool, epi: str) -> tuple[str, int]:
    """``kernel``'s batched twin (``gemm_simt_batched``, never split: the batch fills the SMs)."""
    blocks, dyn = occupancy(a_kmajor, b_kmajor, epi != "EpiNone", False)
    return (
        f"gemm_simt_batched<{template_arg(a_kmajor)}, {template_arg(b_kmajor)}, {epi}, {blocks}, {template_arg(dyn)}>",
        geometry.SIMT_SMEM_BYTES if dyn else 0,
    )


def batched(p: GemmPlan, a: Matrix, b: Matrix, sa: int, sb: int, batch: int, epi: str, dev, ov) -> GemmPlan | None:
    """``p`` over a batch (the entry in the grid's z, operands ``sa`` / ``sb`` floats apart), no
    split-K; None (one GEMM per entry) where an operand is not read in place, or for an epilogue
    (matmul's batches only: linear_relu_div's batch folds into M)."""
    if p.a.prep != "as is" or p.b.prep != "as is" or epi != "EpiNone":
        return None
    name, smem = batched_kernel(p.a.kmajor, p.b.kmajor, epi)
    pa = replace(p.a, vec=p.a.vec and batch_aligned(sa, 4))
    pb = replace(p.b, vec=p.b.vec and batch_aligned(sb, 4))
    return replace(
        p,
        kernel=name,
        smem=smem,
        a=pa,
        b=pb,
        grid=p.grid[:2] + (min(batch, geometry.MAX_GRID_Z),),
        slices=1,
        kslice=a.cols,
        reduce=None,
        reduce_grid=(1, 1, 1),
        batch=batch,
    )


def variants() -> dict[str, list[str]]:
    exprs = []
    for ak in (True, False):
        for bk in (True, False):
            exprs += [kernel(ak, bk, e, False)[0] for e in EPILOGUES] + [kernel(ak, bk, "EpiNone", True)[0]]
            exprs.append(batched_kernel(ak, bk, "EpiNone")[0])
    return {"gemm.cu": exprs}


KERNELS = declare(variants())


def launcher(p: GemmPlan, device: int):
    """``run`` of plan ``p`` bound to ``device`` (``planner.launcher_for``): where both operands
    are read as they are and K is not split (float32 matmul's eager case), the kernel is loaded
    once and the arguments of each (a, b, c, epi) set packed once (docs/design.md#host-cost);
    other plans run ``run`` as it is."""
    if p.batch or p.slices > 1 or p.a.prep != "as is" or p.b.prep != "as is":
        return lambda a, b, c, epi: run(p, a, b, c, epi)
    return packed_launcher(
        handle(KERNELS, p.kernel, device), p.grid, p.block, p.smem, 1, lambda a, b, c, epi: _args(p, a, b, c, epi)
    )


def _args(p: GemmPlan, a, b, out, epi: tuple) -> tuple:
    """The 2-D kernel's arguments: ``out`` (M, N) = a (M, K) @ b (K, N), or split-K's partials."""
    (M, K), N = a.shape, b.shape[1]
    vec = int(p.a.vec) | int(p.b.vec) << 1
    return (a.data_ptr(), p.a.ld, b.data_ptr(), p.b.ld, out.data_ptr(), M, N, K, vec, p.kslice, *epi)


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    """c = epilogue(a @ b); batched plans: a (B, M, K), b (B, K, N) views, c (B, M, N) contiguous."""
    if p.batch:
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        vec = int(p.a.vec) | int(p.b.vec) << 1
        launch_entries(
            KERNELS,
            p,
            c.get_device(),
            lambda z0: (
                a.data_ptr(),
                p.a.ld,
                a.stride(0),
                b.data_ptr(),
                p.b.ld,
                b.stride(0),
                c.data_ptr(),
                M,
                N,
                K,
                vec,
                z0,
                *epi,
            ),
        )
        return
    if p.a.prep == "contiguous copy":
        a = a.contiguous()
    if p.b.prep == "contiguous copy":
        b = b.contiguous()
    out = c if p.slices == 1 else split_workspace(p, c)
    launch.launch(handle(KERNELS, p.kernel, c.get_device()), p.grid, p.block, _args(p, a, b, out, epi), p.smem)
    if p.slices > 1:
        reduce(p, out, c, epi)
