"""wgmma: the Hopper tensor-core GEMM (gemm_wgmma.cuh, sm_90a): wgmma + TMA, a producer and two
consumer warpgroups over a ring of stages, 128 x 256 / 128 / 64 tiles by shape; from a wave of
tiles on a persistent grid of 2-CTA clusters sharing each B tile (TMA multicast) or one CTA per
tile, whichever finishes first by whole waves; small outputs one tile per CTA (the K-splitting
warpgroups, or for 16-bit 128 x 64 tiles with the epilogue staged in the ring); TF32 with a
row-major B as C^T = B^T A^T. What "auto" takes for 16-bit (and TF32-allowed float32) on
Hopper. The choices and their measurements: docs/gemm.md.
"""

from __future__ import annotations

import dataclasses

import torch

from ... import launch
from ...dtypes import CUDA_NAMES
from ...kernel.types import template_arg
from . import geometry, tables, tma
from .common import (
    EPILOGUES,
    TENSOR_CORE_DTYPES,
    GemmPlan,
    Matrix,
    Operand,
    batch_aligned,
    cdiv,
    kmajor_operand,
    n_major_in_place,
    needs_hopper,
    reduce_grid,
    split,
    tiled_sizes,
)
from .epilogues import NO_ARGS
from .hopper import WGMMA, launch_grid, run_hopper, swaps
from .hopper import launcher as hopper_launcher
from .runtime import SM90A, declare, handle, launch_steps, packed_launcher, prepare, reduce_step, split_workspace

NAME = WGMMA  # named with the runner, which tells its kernel from tf32x3's


def supports(M: int, N: int, K: int, dtype, dev) -> str | None:
    return (
        tiled_sizes(M, N, K)
        or (None if dtype in TENSOR_CORE_DTYPES else f"takes float16, bfloat16 or float32 (TF32) operands, got {dtype}")
        or needs_hopper(NAME, dev, "tc")
    )


# --- the tables' rules (pure; CPU tests call them) ------------------------------------------


def tile_n(M: int, N: int, sm_count: int, unsplit: bool = False) -> int:
    """Block-tile width: 256 (the fastest per block) unless that leaves fewer blocks than
    WGMMA_WIDE_MIN_WAVES x the SM count, then 128 (twice the blocks), or 64 where 128-wide
    blocks fill less than WG_NARROW_MAX_WAVES of the SMs and more than the split-K share
    (WG_SPLIT_MAX_WAVES), or any fewer where K is not split (``unsplit``: the swapped kernel
    where ``swap_slices`` does not split, a K too short for ``split``, ``split_k=False``)."""
    if cdiv(M, geometry.WG_BM) * cdiv(N, 256) >= tables.WGMMA_WIDE_MIN_WAVES * sm_count:
        return 256
    blocks = cdiv(M, geometry.WG_BM) * cdiv(N, 128)
    floor = 0 if unsplit else tables.WG_SPLIT_MAX_WAVES * sm_count
    return 64 if floor < blocks < tables.WG_NARROW_MAX_WAVES * sm_count else 128


def wide(M: int, N: int, sm_count: int) -> tuple[int, int] | None:
    """``(tile width, cluster)`` for outputs of at least WG_CLUSTER_MIN_WAVES waves of 128 x 256
    tiles (None below): the WG_WIDE_SPEEDS entry with the least time, taken as whole waves of
    its units (``cluster`` tiles) over the clusters that fit (``sm_count // cluster``) times
    the tile area over its speed. Clusters of 2 need two tile rows."""
    rows = cdiv(M, geometry.WG_BM)
    if rows * cdiv(N, 256) < tables.WG_CLUSTER_MIN_WAVES * sm_count:
        return None
    best = None
    for bn, cluster, speed in tables.WG_WIDE_SPEEDS:
        if cluster > 1 and rows == 1:
            continue
        waves = cdiv(walk(M, N, bn, 1, cluster, sm_count)[1], sm_count // cluster)
        cost = waves * bn / 256 / speed
        if best is None or cost < best[0]:
            best = (cost, bn, cluster)
    return best[1], best[2]


def swap_slices(M: int, N: int, K: int, bk: int, sm_count: int, ov) -> int:
    """K slices of the swapped kernel's M x N output (C^T's; 1: unsplit): ``split``'s for 128 x
    128 tiles, run by the batched swapped kernel with each slice an entry of A's and B's 3-D maps
    (so equal slices of a multiple of 4 values: fewer slices until they divide K) and of the
    workspace's; more than two (two: 64-wide tiles instead, twice the CTAs and no reduction), K
    of at least WG_SWAP_SPLIT_MIN_KTILES k-tiles. Overrides of the tile, cluster, persistent walk
    or ``split_k=False``: unsplit."""
    if ov.split_k is False or ov.tile_n not in (None, 128) or ov.cluster not in (None, 1) or ov.persistent:
        return 1
    if cdiv(K, bk) < tables.WG_SWAP_SPLIT_MIN_KTILES:
        return 1
    slices = split(M, N, K, 128, bk, sm_count)[0]
    while slices > 2 and (K % slices or K // slices % 4):
        slices -= 1
    return slices if slices > 2 else 1


def walk(M: int, N: int, bn: int, slices: int, cluster: int, sm_count: int) -> tuple[int, int]:
    """``(grid, units)``: ``units`` (clusters' work items: ``cluster`` tiles of a column of one K
    slice) and a persistent grid of ``cluster`` CTAs per cluster, at most one cluster per unit
    and per ``cluster`` SMs (the runner lowers it to the clusters the device runs at once)."""
    units = cdiv(cdiv(M, geometry.WG_BM), cluster) * cdiv(N, bn) * slices
    return cluster * min(units, sm_count // cluster), units


def tma_store(N: int, itemsize: int, slices: int, override: bool | None = None) -> bool:
    """Whether the epilogue stores C through the TMA: where a tensor map of C exists (its rows,
    N elements, a multiple of 16 bytes: C is a fresh contiguous tensor) and C is the output
    (split-K's partial products keep the threads' stores). ``override`` False: the threads'
    stores; True where impossible: ValueError."""
    possible = slices == 1 and (N * itemsize) % 16 == 0
    if override and not possible:
        raise ValueError(
            f"tma_store=True needs C's rows a multiple of 16 bytes and no split-K; got N = {N} "
            f"elements of {itemsize} bytes, {slices} K slices"
        )
    return possible and override is not False


def ksplits(M: int, N: int, K: int, bk: int, sm_count: int, split_k: bool = True) -> bool:
    """Whether the table takes the K-splitting warpgroups (gemm_wgmma_ksplit, WG_KSPLIT): where
    it would pick 128 x 64 tiles, or split K over 128 x 128 tiles where K is at most
    WG_KSPLIT_MAX_KTILES k-tiles or the split makes no more CTAs than WG_KSPLIT_BM x 128 tiles."""
    bn = tile_n(M, N, sm_count)
    if bn == 64:
        return True
    slices = split(M, N, K, bn, bk, sm_count)[0] if split_k else 1
    return slices > 1 and (
        cdiv(K, bk) <= tables.WG_KSPLIT_MAX_KTILES
        or cdiv(M, geometry.WG_KSPLIT_BM) * cdiv(N, 128) >= cdiv(M, geometry.WG_BM) * cdiv(N, bn) * slices
    )


def ksplit_narrow(M: int, N: int, K: int, bk: int, sm_count: int) -> bool:
    """Whether the table takes the K-splitting warpgroups on WG_KSPLIT_BM x 64 tiles: outputs
    of at most a wave of them (a CTA per SM) with K of at most WG_KSPLIT_NARROW_MAX_KTILES
    k-tiles. A small output's main loop runs at the pace one SM takes in its k-tiles: 16 KB
    each against 24 KB for 128 x 64 tiles, and twice the CTAs share the work."""
    return (
        cdiv(M, geometry.WG_KSPLIT_BM) * cdiv(N, 64) <= sm_count and cdiv(K, bk) <= tables.WG_KSPLIT_NARROW_MAX_KTILES
    )


def singles(M: int, K: int, dtype: torch.dtype, bk: int) -> bool:
    """Whether the table takes one WG_BM x 64 tile per CTA (gemm_wgmma_single) where it would
    take the K-splitting warpgroups: 16-bit, more than WG_KSPLIT_BM rows, K of at most
    WG_SINGLE_MAX_KTILES k-tiles."""
    return dtype != torch.float32 and M > geometry.WG_KSPLIT_BM and cdiv(K, bk) <= tables.WG_SINGLE_MAX_KTILES


def layout(M: int, N: int, K: int, bk: int, dev, ov, unsplit: bool = False) -> dict:
    """The tile width, split-K, cluster and grid for an M x N output (the kernel's: C^T's when
    it swaps the operands), from the tables or ``ov``'s overrides; ``unsplit``: of a kernel
    that never splits K (``tile_n``'s, where no cluster is asked for; also taken where ``split``
    would not split K)."""
    # by whole waves where neither the tile width nor the cluster is overridden
    model = None if ov.tile_n or ov.cluster else wide(M, N, dev.sm_count)
    # the split-K share's outputs whose K does not split take 128 x 64 tiles too, twice the CTAs
    # (docs/gemm.md#tile-width)
    unsplit = unsplit or not ov.split_k or split(M, N, K, 128, bk, dev.sm_count)[0] == 1
    narrow = unsplit and ov.cluster in (None, 1)
    bn = ov.tile_n or (model[0] if model else tile_n(M, N, dev.sm_count, narrow))
    slices, kslice = split(M, N, K, bn, bk, dev.sm_count) if ov.split_k else (1, K)
    tiles = cdiv(M, geometry.WG_BM) * cdiv(N, bn) * slices
    wide_grid = tiles >= tables.WG_CLUSTER_MIN_WAVES * dev.sm_count and bn >= 128 and cdiv(M, geometry.WG_BM) > 1
    cluster = ov.cluster or (model[1] if model else 2 if wide_grid else 1)
    if cluster * 64 > bn:
        raise ValueError(
            f"cluster={cluster} needs tile_n >= {cluster * 64} (each CTA loads whole 64-column boxes "
            f"of B), got tile_n={bn}"
        )
    persistent = cluster > 1 if ov.persistent is None else ov.persistent
    grid, units = walk(M, N, bn, slices, cluster, dev.sm_count)
    return dict(
        bn=bn,
        slices=slices,
        kslice=kslice,
        cluster=cluster,
        group=ov.group or tables.WG_GROUP,
        persistent=persistent,
        grid=(grid if persistent else cluster * units, 1, 1),
    )


# --- the plan -------------------------------------------------------------------------------


def plan(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, ov) -> GemmPlan:
    T, bk = CUDA_NAMES[dtype], geometry.WG_BK[dtype]
    pa = kmajor_operand(a)
    if ov.swap and ov.tma_store is False:
        raise ValueError("swap=True with tma_store=False: the swapped kernel stores through the TMA only")
    if ov.swap and ov.ksplit:
        raise ValueError("swap=True with ksplit=True: the K-splitting kernel reads B K-major or 16-bit N-major")
    # (tma_store=False asks for the threads' stores, ksplit=True the K-splitting kernel: the
    # transpose pass then)
    swap = swaps(N, dtype, b, ov.swap) and ov.tma_store is not False and not ov.ksplit
    # C^T's geometry; its K split (``swap_slices``) by the batched swapped kernel over K's
    # slices, not the transpose pass with the K-splitting or split-K kernels (slower at every
    # shape measured: docs/gemm.md#swap)
    slices = swap_slices(N, M, K, bk, dev.sm_count, ov) if swap else 1
    if slices > 1:
        return GemmPlan(
            NAME,
            "gemm_wgmma_batched_swap<128, EpiNone>",
            SM90A,
            (cdiv(N, geometry.WG_BM) * cdiv(M, 128) * slices, 1, 1),
            (geometry.WG_THREADS, 1, 1),
            geometry.WG_SMEM_BYTES,
            pa,
            Operand("n-major", False, b.stride0),
            (geometry.WG_BM, 128),
            slices=slices,
            kslice=K // slices,
            reduce=f"gemm_splitk_reduce<float, {epi}>",
            reduce_grid=reduce_grid(M * N),
            bk=bk,
            group=ov.group or tables.WG_GROUP,
            tma_store=True,
            swap=True,
        )
    geo = layout(N, M, K, bk, dev, dataclasses.replace(ov, split_k=False), unsplit=True) if swap else None
    if swap:
        bn, cl = geo["bn"], geo["cluster"]
        return GemmPlan(
            NAME,
            f"gemm_wgmma_swap<{bn}, {cl}, {epi}>",
            SM90A,
            geo["grid"],
            (geometry.WG_THREADS, 1, 1),
            geometry.WG_SMEM_BYTES,
            pa,
            Operand("n-major", False, b.stride0),
            (geometry.WG_BM, bn),
            kslice=K,
            bk=bk,
            cluster=cl,
            group=geo["group"],
            persistent=geo["persistent"],
            tma_store=True,
            swap=True,
        )
    # a row-major B (matmul's b) is read in place, N-major, through the instruction's
    # transpose bit (16-bit types; TF32 reads K-major only); any other B as (N, K) K-major
    if dtype != torch.float32 and n_major_in_place(b):
        pb, n_major = Operand("n-major", False, b.stride0), True
    else:
        pb, n_major = kmajor_operand(b.T), False
    if ov.ksplit and (
        ov.cluster is not None or ov.persistent is not None or ov.tile_n not in (None, *geometry.WG_KSPLIT_TILE_NS)
    ):
        raise ValueError(
            f"ksplit=True takes tile_n {' or '.join(map(str, geometry.WG_KSPLIT_TILE_NS))} and no cluster or "
            f"persistent override (its tiles are {geometry.WG_KSPLIT_BM} x tile_n, one CTA each); got "
            f"tile_n={ov.tile_n}, cluster={ov.cluster}, persistent={ov.persistent}"
        )
    if ov.single and (ov.shape or ov.ksplit or dtype == torch.float32):
        got = ", ".join(
            [str(dtype)]
            + [
                f"{o}={getattr(ov, o)!r}"
                for o in ("tile_n", "cluster", "persistent", "ksplit")
                if getattr(ov, o) is not None
            ]
        )
        raise ValueError(
            f"single=True takes 16-bit operands and no tile_n, cluster, persistent or ksplit=True "
            f"override (its tile is {geometry.WG_BM} x 64, one CTA each); got {got}"
        )
    table = ov.ksplit is None and tables.WG_KSPLIT and not ov.shape
    small = table and ksplits(M, N, K, bk, dev.sm_count, ov.split_k)
    narrow = table and ksplit_narrow(M, N, K, bk, dev.sm_count)  # (single=True returns first)
    store = tma_store(N, a.itemsize, 1, ov.tma_store)
    if ov.single or (ov.single is None and small and not narrow and singles(M, K, dtype, bk)):
        return GemmPlan(
            NAME,
            f"gemm_wgmma_single<{T}, {template_arg(n_major)}, 64, {epi}>",
            SM90A,
            (cdiv(M, geometry.WG_BM) * cdiv(N, 64), 1, 1),
            (geometry.WG_THREADS, 1, 1),
            geometry.WG_KSPLIT_SMEM_BYTES,
            pa,
            pb,
            (geometry.WG_BM, 64),
            kslice=K,
            bk=bk,
            group=ov.group or tables.WG_GROUP,
            tma_store=store,
            single=True,
        )
    if ov.ksplit or small or narrow:
        bn = 64 if narrow else ov.tile_n or 128
        units = cdiv(M, geometry.WG_KSPLIT_BM) * cdiv(N, bn)
        return GemmPlan(
            NAME,
            f"gemm_wgmma_ksplit<{T}, {template_arg(n_major)}, {bn}, {epi}>",
            SM90A,
            (units, 1, 1),
            (geometry.WG_THREADS, 1, 1),
            geometry.WG_KSPLIT_SMEM_BYTES,
            pa,
            pb,
            (geometry.WG_KSPLIT_BM, bn),
            kslice=K,
            bk=bk,
            group=ov.group or tables.WG_GROUP,
            tma_store=store,
            ksplit=True,
        )
    geo = layout(M, N, K, bk, dev, ov)
    bn, cluster, slices = geo["bn"], geo["cluster"], geo["slices"]
    store = tma_store(N, a.itemsize, slices, ov.tma_store)
    common = dict(
        grid=geo["grid"],
        block=(geometry.WG_THREADS, 1, 1),
        smem=geometry.WG_SMEM_BYTES,
        a=pa,
        b=pb,
        tile=(geometry.WG_BM, bn),
        bk=bk,
        cluster=cluster,
        group=geo["group"],
        persistent=geo["persistent"],
    )
    if slices > 1:
        return GemmPlan(
            NAME,
            f"gemm_wgmma_partial<{T}, {template_arg(n_major)}, {bn}, {cluster}>",
            SM90A,
            slices=slices,
            kslice=geo["kslice"],
            reduce=f"gemm_splitk_reduce<{T}, {epi}>",
            reduce_grid=reduce_grid(M * N),
            **common,
        )
    return GemmPlan(
        NAME,
        f"gemm_wgmma<{T}, {template_arg(n_major)}, {bn}, {cluster}, {epi}>",
        SM90A,
        kslice=K,
        tma_store=store,
        **common,
    )


def batched(p: GemmPlan, a: Matrix, b: Matrix, sa: int, sb: int, batch: int, epi: str, dev, ov) -> GemmPlan | None:
    """``p`` (one entry's plan) over a batch: ``gemm_wgmma_batched``, one CTA per 128 x BN tile of
    every entry, or a persistent grid walking them where there are more than a wave of them (BN 256
    from half a wave of such tiles, as ``tile_n``; overrides ``tile_n`` 128 / 256 and
    ``persistent``), the entry the outermost coordinate of 3-D TMA maps of A and B (``sa`` /
    ``sb`` elements apart; 0: broadcast), the threads' stores. For matmuls (no epilogue) whose a
    the 2-D plan reads in place, whose entries keep 16-byte alignment and do not interleave (each
    a whole matrix past the last, or all one), and whose b it reads in place, swaps (TF32 with a
    row-major b: ``gemm_wgmma_batched_swap``, C^T = B^T A^T entry by entry, C stored through a 3-D
    TMA map) or, for entries of at most WG_BATCH_MAX_WORK multiply-adds, copies (copied K-major
    in one pass); None (one GEMM per entry) otherwise."""
    es = a.itemsize
    M, K, N = a.rows, a.cols, b.cols
    copy_b = p.b.prep in ("transpose", "k-major copy") and not p.swap and M * N * K <= tables.WG_BATCH_MAX_WORK
    if (
        p.family != NAME
        or epi != "EpiNone"
        or p.a.prep != "as is"
        or not (copy_b or p.b.prep in ("as is", "n-major"))
        or not batch_aligned(sa, es)
        or not (copy_b or batch_aligned(sb, es))
    ):
        return None
    pb = Operand("k-major copy", True, cdiv(K * es, 16) * 16 // es) if copy_b else p.b
    # entries one after another (or broadcast): the 3-D maps' batch stride past a whole entry
    b_extent = K * pb.ld if pb.prep == "n-major" else N * pb.ld
    if not (sa == 0 or sa >= M * p.a.ld) or not (copy_b or sb == 0 or sb >= b_extent):
        return None
    if ov.cluster not in (None, 1) or ov.tile_n == 64 or ov.ksplit or ov.single or ov.tma_store:
        raise ValueError(
            "the batched kernels take tile_n 128 or 256, persistent and group overrides only (one CTA "
            "a cluster, their own stores: the threads', or the TMA's where swapped)"
        )
    # the kernel's tiles: C^T's where swapped (its rows over N, its columns over M)
    rows, cols = (cdiv(N, geometry.WG_BM), M) if p.swap else (cdiv(M, geometry.WG_BM), N)
    bn = ov.tile_n or (256 if rows * cdiv(cols, 256) * batch >= tables.WGMMA_WIDE_MIN_WAVES * dev.sm_count else 128)
    units = rows * cdiv(cols, bn) * batch
    if units > geometry.INT32_MAX:
        return None
    # more tiles than a wave: a persistent grid walks them (H200, bf16 32 x (1024x128x1024),
    # 1024 tiles: 0.0313 ms against 0.0448 with one CTA a tile; torch.bmm 0.0293)
    persistent = units > dev.sm_count if ov.persistent is None else bool(ov.persistent)
    if p.swap:
        kernel = f"gemm_wgmma_batched_swap<{bn}, {epi}>"
    else:
        T = p.kernel.split("<")[1].split(",")[0]  # the 2-D plan's element type: bf16, f16 or float
        kernel = f"gemm_wgmma_batched<{T}, {template_arg(pb.prep == 'n-major')}, {bn}, {epi}>"
    return GemmPlan(
        NAME,
        kernel,
        SM90A,
        (min(units, dev.sm_count) if persistent else units, 1, 1),
        (geometry.WG_THREADS, 1, 1),
        geometry.WG_SMEM_BYTES,
        p.a,
        pb,
        (geometry.WG_BM, bn),
        kslice=K,
        bk=p.bk,
        group=ov.group or tables.WG_GROUP,
        persistent=persistent,
        tma_store=p.swap,
        batch=batch,
        swap=p.swap,
    )


def variants() -> dict[str, list[str]]:
    exprs = [
        f"gemm_wgmma_batched<{CUDA_NAMES[dt]}, {template_arg(n_major)}, {bn}, EpiNone>"
        for dt in TENSOR_CORE_DTYPES
        for n_major in ((False, True) if dt != torch.float32 else (False,))
        for bn in (128, 256)
    ]
    exprs += [f"gemm_wgmma_batched_swap<{bn}, EpiNone>" for bn in (128, 256)]
    for dt in TENSOR_CORE_DTYPES:
        T = CUDA_NAMES[dt]
        for n_major in (False, True) if dt != torch.float32 else (False,):
            for cl in tables.WG_CLUSTERS:  # pairs share B tiles of at least 128 columns
                exprs += [
                    f"gemm_wgmma<{T}, {template_arg(n_major)}, {bn}, {cl}, {e}>"
                    for bn in geometry.WG_TILE_NS
                    for e in EPILOGUES
                    if cl * 64 <= bn
                ]
                exprs.append(f"gemm_wgmma_partial<{T}, {template_arg(n_major)}, 128, {cl}>")
            exprs += [
                f"gemm_wgmma_ksplit<{T}, {template_arg(n_major)}, {bn}, {e}>"
                for bn in geometry.WG_KSPLIT_TILE_NS
                for e in EPILOGUES
            ]
            if dt != torch.float32:
                exprs += [f"gemm_wgmma_single<{T}, {template_arg(n_major)}, 64, {e}>" for e in EPILOGUES]
    exprs += [
        f"gemm_wgmma_swap<{bn}, {cl}, {e}>"
        for bn in geometry.WG_TILE_NS
        for cl in tables.WG_CLUSTERS
        for e in EPILOGUES
        if cl * 64 <= bn
    ]
    return {SM90A: exprs}


KERNELS = declare(variants())


def _batched_args(p: GemmPlan, a, b, c, epi: tuple) -> tuple:
    """The batched kernel's arguments for a (B, M, K), b (B, K, N) views in the plan's layouts
    and c (B, M, N) contiguous, and what must live until the launch (a copied b, or None). An
    operand with one entry, or a broadcast one (batch stride 0), is a map one matrix deep read
    at entry 0."""
    B, M, K = a.shape
    N = b.shape[2]
    a_bc, b_bc = B == 1 or a.stride(0) == 0, B == 1 or b.stride(0) == 0
    a_depth = dict(depth=1 if a_bc else B, depth_stride=M * p.a.ld if a_bc else a.stride(0))
    # A K-major, boxes of bk x the tile's rows (swapped: A is the kernel's B side, its columns)
    a_map = tma.tensor_map_at(a.data_ptr(), a.dtype, K, M, p.a.ld, p.bk, p.tile[1 if p.swap else 0], **a_depth)
    keep = None
    if p.swap:  # C^T = B^T A^T: B (K, N) row-major, the kernel's A side, in boxes of WG_SWAP_BOX x WG_SWAP_BOX
        box = geometry.WG_SWAP_BOX
        b_depth = dict(depth=1 if b_bc else B, depth_stride=K * p.b.ld if b_bc else b.stride(0))
        b_map = tma.tensor_map_at(b.data_ptr(), b.dtype, N, K, p.b.ld, box, box, **b_depth)
        # C's entries, stored through the TMA in boxes of C^T's tiles (as hopper.c_map's)
        c_map = tma.tensor_map_at(c.data_ptr(), c.dtype, N, M, N, box, box, exact=True, depth=B, depth_stride=M * N)
        return (b_map, a_map, c_map, M, N, K, p.group, B, int(b_bc) | int(a_bc) << 1, *epi), keep
    if p.b.prep == "n-major":  # boxes of 64 columns (128 bytes) x bk rows of K
        b_map = tma.tensor_map_at(
            b.data_ptr(),
            b.dtype,
            N,
            K,
            p.b.ld,
            64,
            p.bk,
            depth=1 if b_bc else B,
            depth_stride=K * p.b.ld if b_bc else b.stride(0),
        )
    elif p.b.prep == "k-major copy":  # B^T of every entry (of entry 0 where broadcast), K-major, padded
        keep = bt = prepare((b[:1] if b_bc else b).transpose(1, 2), p.b)
        b_map = tma.tensor_map_at(
            bt.data_ptr(), b.dtype, K, N, p.b.ld, p.bk, p.tile[1], depth=bt.shape[0], depth_stride=N * p.b.ld
        )
    else:  # B^T (N, K) K-major
        b_map = tma.tensor_map_at(
            b.data_ptr(),
            b.dtype,
            K,
            N,
            p.b.ld,
            p.bk,
            p.tile[1],
            depth=1 if b_bc else B,
            depth_stride=N * p.b.ld if b_bc else b.stride(0),
        )
    return (a_map, b_map, c.data_ptr(), M, N, K, p.group, B, int(a_bc) | int(b_bc) << 1, *epi), keep


def run_batched(p: GemmPlan, a, b, c, epi: tuple) -> None:
    """A batched plan (``_batched_args``' operands): its maps encoded and launched."""
    h = handle(KERNELS, p.kernel, c.get_device())
    args, keep = _batched_args(p, a, b, c, epi)
    launch.launch(h, launch_grid(h, p), p.block, args, p.smem, p.cluster)
    del keep  # launched: the stream orders any reuse of this memory after the kernel


def _batched_launcher(p: GemmPlan, device: int):
    """``run_batched`` of plan ``p`` bound to ``device``: the kernel loaded and the grid lowered
    once, the arguments (maps included) packed once per address set, as ``hopper.launcher``
    does for one GEMM; a b copied on every call (``"k-major copy"``) runs ``run_batched``."""
    if p.b.prep == "k-major copy":
        return lambda a, b, c, epi: run_batched(p, a, b, c, epi)
    h = handle(KERNELS, p.kernel, device)
    return packed_launcher(
        h, launch_grid(h, p), p.block, p.smem, p.cluster, lambda a, b, c, epi: _batched_args(p, a, b, c, epi)[0]
    )


def _swap_split_steps(p: GemmPlan, a, b, c, epi: tuple, ws) -> list:
    """The launches (``(handle, grid, block, args, shared memory)``) of a swapped plan split K
    ways (``swap_slices``): the batched swapped kernel, slice z of K (``p.kslice`` values) entry z
    of A's map (K-major, ``a`` as prepared) and of B's (row-major), C^T's partial sums entry z of
    ``ws`` (slices, M, N) fp32; then the reduction (in order, with the epilogue) into c."""
    M, N = c.shape
    ks, box = p.kslice, geometry.WG_SWAP_BOX
    depth = dict(depth=p.slices)
    b_map = tma.tensor_map_at(b.data_ptr(), b.dtype, N, ks, p.b.ld, box, box, depth_stride=ks * p.b.ld, **depth)
    a_map = tma.tensor_map_at(a.data_ptr(), a.dtype, ks, M, p.a.ld, p.bk, p.tile[1], depth_stride=ks, **depth)
    c_map = tma.tensor_map_at(ws.data_ptr(), ws.dtype, N, M, N, box, box, exact=True, depth_stride=M * N, **depth)
    args = (b_map, a_map, c_map, M, N, ks, p.group, p.slices, 0, *NO_ARGS)
    h = handle(KERNELS, p.kernel, c.get_device())
    return [(h, p.grid, p.block, args, p.smem), reduce_step(p, ws.data_ptr(), c, epi)]


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    if p.batch:
        run_batched(p, a, b, c, epi)
    elif p.swap and p.slices > 1:
        a2, ws = prepare(a, p.a), split_workspace(p, c)
        for step in _swap_split_steps(p, a2, b, c, epi, ws):
            launch.launch(*step)
        del a2, ws  # launched: the stream orders any reuse of this memory after the kernels
    else:
        run_hopper(KERNELS, p, a, b, c, epi)


def launcher(p: GemmPlan, device: int):
    """``run`` of plan ``p`` bound to ``device`` (``planner.launcher_for``): a swapped plan split
    K ways whose A is read as it is packs its steps once per address set (the workspace's too)."""
    if p.batch:
        return _batched_launcher(p, device)
    if p.swap and p.slices > 1:
        if p.a.prep != "as is":
            return lambda a, b, c, epi: run(p, a, b, c, epi)
        by_address: dict[tuple, list] = {}

        def go(a, b, c, epi):
            ws = split_workspace(p, c)
            key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), ws.data_ptr(), epi[2])
            launch_steps(by_address, key, lambda: _swap_split_steps(p, a, b, c, epi, ws))
            # launched: the stream orders any reuse of the workspace's memory after the kernels

        return go
    return hopper_launcher(KERNELS, p, device)
