"""fp16x3: float32 at fp32 accuracy on the Hopper fp16 tensor cores (gemm_fp16x3.cuh, sm_90a),
twice TF32's rate: the largest magnitudes of B's rows moved to A's columns by powers of two,
or A's columns' to B's rows where A is the smaller (exact: the result does not change under
any such scaling along K; ``k_source``), then each row of A and column of B scaled by a power
of two that brings its largest finite magnitude into [2^14, 2^15) and split into fp16 hi + lo
by one pass over each operand (fp16x3_split; a row-major B split in place N-major by
fp16x3_colmax_n + fp16x3_split_n), then three fp16 products per k-step, partial sums promoted every k-tile, the
scale undone in the epilogue; 128 x 128 tiles, split-K as tf32x3's. Taken by name only; its
error model: docs/numerics.md.
"""

from __future__ import annotations

import torch

from ... import launch, occupancy
from ...kernel.types import template_arg
from . import geometry, tma
from .common import (
    EPILOGUES,
    GemmPlan,
    Matrix,
    Operand,
    cdiv,
    kmajor_operand,
    n_major_in_place,
    needs_hopper,
    reduce_grid,
    split,
    tiled_sizes,
)
from .runtime import SM90A, after_step, declare, device_info, handle, launch_steps, prepare, reduce_step
from .tables import WG_GROUP, X3_SPLIT_MAX_WAVES

NAME = "fp16x3"


def supports(M: int, N: int, K: int, dtype, dev) -> str | None:
    return (
        tiled_sizes(M, N, K)
        or (
            None
            if dtype == torch.float32
            else f"is the fp32 kernel on fp16 tensor cores (three products); takes float32 operands, got {dtype}"
        )
        or needs_hopper(NAME, dev, "simt (fp32 on the CUDA cores)")
    )


def plan(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, ov) -> GemmPlan:
    """Both operands through fp16x3_split (from their tensor-core form: K-major fp32 rows)
    into scaled fp16 pieces, then gemm_fp16x3 on 128 x 128 tiles (a persistent grid past a
    wave), split-K as 3xTF32's."""
    if ov.tile_n not in (None,) + geometry.X3_TILE_NS:
        raise ValueError(f"tile_n must be one of {geometry.X3_TILE_NS} for algo='fp16x3', got {ov.tile_n!r}")
    if ov.swap:
        raise ValueError("swap=True: algo='fp16x3' reads both operands as K-major fp16 pieces (no swapped kernel)")
    bk, bn = geometry.WG_BK[torch.float16], geometry.X3_TILE_NS[0]
    slices, kslice = split(M, N, K, bn, bk, dev.sm_count, X3_SPLIT_MAX_WAVES) if ov.split_k else (1, K)
    # a row-major b (matmul's) split in place into N-major pieces, each column scaled
    # (fp16x3_split_n: no transpose pass), the kernel reading them through the wgmma's
    # transpose bit; any other b's columns as K-major rows (transposed or copied first)
    # a prepacked weight's pieces: K-major rows of piece_ld(K) (docs/prepack.md); t from B's rows
    n_major = n_major_in_place(b) and not ov.b_packed
    pb = Operand("n-major split", False, b.stride0) if n_major else kmajor_operand(b.T)
    # the passes run() makes: t, the row splits, B's N-major split
    if ov.b_packed:
        pb = Operand("prepacked", True, piece_ld(K))
        how = "A's only (fp16x3_split); B's pieces prepacked"
    elif not n_major:
        how = "fp16x3_colmax_n, fp16x3_split"
    elif k_source(M, N) == "a":
        how = "fp16x3_colmax_n, fp16x3_split, fp16x3_colmax_n + fp16x3_split_n"
    elif rowcol(N):  # B's t and its columns' keys in one read
        how = "fp16x3_rowcolmax, fp16x3_split, fp16x3_split_n"
    else:
        how = "fp16x3_rowmax, fp16x3_split, fp16x3_colmax_n + fp16x3_split_n"
    # past a wave of tiles a persistent grid, one CTA an SM (its shared memory), walks them
    # (``persistent=False``: one CTA a tile)
    tiles = cdiv(N, bn) * cdiv(M, geometry.WG_BM)
    persistent = tiles > dev.sm_count if ov.persistent is None else bool(ov.persistent)
    common = dict(
        grid=(min(tiles, dev.sm_count) if persistent else tiles, 1, slices),
        block=(geometry.WG_THREADS, 1, 1),
        smem=geometry.X3_SMEM_BYTES,
        a=kmajor_operand(a),
        b=pb,
        tile=(geometry.WG_BM, bn),
        bk=bk,
        group=ov.group or WG_GROUP,
        persistent=persistent,
        notes=(f"operands split into fp16 pieces ({how})",),
    )
    if slices > 1:
        return GemmPlan(
            NAME,
            f"gemm_fp16x3_partial<{bn}, {template_arg(n_major)}>",
            SM90A,
            slices=slices,
            kslice=kslice,
            reduce=f"gemm_splitk_reduce<float, {epi}>",
            reduce_grid=reduce_grid(M * N),
            **common,
        )
    return GemmPlan(NAME, f"gemm_fp16x3<{bn}, {epi}, {template_arg(n_major)}>", SM90A, kslice=K, **common)


def variants() -> dict[str, list[str]]:
    exprs = []
    for nm in (False, True):
        exprs += [f"gemm_fp16x3<{bn}, {e}, {template_arg(nm)}>" for bn in geometry.X3_TILE_NS for e in EPILOGUES]
        exprs += [f"gemm_fp16x3_partial<{bn}, {template_arg(nm)}>" for bn in geometry.X3_TILE_NS]
    return {
        SM90A: exprs
        + ["fp16x3_split", "fp16x3_rowmax", "fp16x3_colmax_n", "fp16x3_split_n"]
        + [f"fp16x3_split_ring<{t}, {s}>" for _, t, s in geometry.X3H_RINGS]
        + [f"fp16x3_rowcolmax<{j}>" for j in geometry.X3H_ROWCOL_JS]
    }


KERNELS = declare(variants())


# --- the split ------------------------------------------------------------------------------
# tk: t[k] as bytes (int8), the floor(log2) of the largest finite magnitude of the source
# operand's K-slices (B's rows or A's columns; ``k_source``), clamped to [-126, 126]; the
# source's values are split times 2^-t[k] (kneg), the other's times 2^t[k]; tk 0: no shift.


def k_source(M: int, N: int) -> str:
    """Which operand's K-slices give t: "a" (its columns) where A is the smaller to read
    again (M < N: the level2/63 layer's 1024 x 8192 against its 8192 x 8192 weight), else "b"
    (its rows: a warp a row where it is row-major, no atomics)."""
    return "a" if M < N else "b"


# Each pass below is a step, ``(handle, grid, block, args, shared memory)``: launched at once
# (``launch.launch(*step)``) or packed ahead and kept by the launcher.


def split_rows(x: torch.Tensor, op: Operand, hi: int, lo: int, ldo: int, ex: int, tk: int = 0, kneg: bool = False):
    """fp16x3_split of ``x`` (rows, K) fp32, K-major rows ``op.ld`` apart, into the pieces at
    device addresses ``hi`` / ``lo`` (fp16, rows ``ldo`` apart) and the rows' exponents at ``ex``
    (int32): its step."""
    rows, k = x.shape
    dev, args = x.get_device(), (x.data_ptr(), op.ld, rows, k, hi, lo, ldo, ex, tk, kneg)
    ring = split_ring(k, dev)
    if ring is None:
        return (handle(KERNELS, "fp16x3_split", dev), (rows, 1, 1), (geometry.X3H_SPLIT_THREADS, 1, 1), args, 0)
    h, threads, smem, most = ring
    return (h, (min(rows, most), 1, 1), (threads, 1, 1), args, smem)


def split_ring(k: int, dev: int) -> tuple[launch.KernelHandle, int, int, int] | None:
    """fp16x3_split_ring for rows of ``k`` values on device ``dev`` (``X3H_RINGS``' first entry
    that holds them): its handle, threads, shared memory and most blocks (a persistent grid: as
    many as the SMs hold at once). None: fp16x3_split (rows past the table, or under 4 values)."""
    if k < 4:
        return None
    for max_k, threads, ring_rows in geometry.X3H_RINGS:
        if k <= max_k:
            h, smem = handle(KERNELS, f"fp16x3_split_ring<{threads}, {ring_rows}>", dev), ring_rows * (k // 4) * 16
            per_sm = max(1, occupancy.blocks_per_sm(h, (threads, 1, 1), smem))
            return h, threads, smem, per_sm * device_info(dev).sm_count
    return None


def row_shifts(b: torch.Tensor, op: Operand, tk: int):
    """fp16x3_rowmax: t of a row-major ``b`` (K, N) fp32's rows (``op.ld`` apart) into ``tk``
    (int8, K): its step."""
    k, n = b.shape
    return (
        handle(KERNELS, "fp16x3_rowmax", b.get_device()),
        (cdiv(k, geometry.X3H_NSPLIT_THREADS // 32), 1, 1),
        (geometry.X3H_NSPLIT_THREADS, 1, 1),
        (b.data_ptr(), op.ld, k, n, tk),
        0,
    )


def rowcol(n: int) -> tuple[int, int] | None:
    """fp16x3_rowcolmax's (J, threads) for rows of ``n`` values: J float4 a thread, the fewest
    whole warps that hold a row; None where no block can (or ``n`` is 0)."""
    for j in geometry.X3H_ROWCOL_JS:
        if 0 < n <= 4 * j * geometry.X3H_ROWCOL_THREADS:
            return j, cdiv(cdiv(n, 4 * j), 32) * 32
    return None


def row_and_column_keys(b: torch.Tensor, op: Operand, tk: int, keys: int, done: int, acc: int) -> list:
    """t of a row-major ``b`` (K, N) fp32's rows (``op.ld`` apart, 16-byte aligned) into ``tk``
    (int8, K) and its columns' keys over the rows times 2^-t[k] into ``keys`` (int32, N): where
    a block holds a row (``rowcol``), fp16x3_rowcolmax, one read of ``b``, accumulating in
    ``acc`` (int32, N) and counting in ``done`` (uint32), both zero and left zero; else
    fp16x3_rowmax, then fp16x3_colmax_n into ``keys``, zeroed first. Its steps (none for K = 0)."""
    k, n = b.shape
    fused = rowcol(n)
    if fused is None:
        return [row_shifts(b, op, tk), column_keys(b, op.ld, keys, tk, kneg=True)]
    if k == 0:
        return []
    (j, threads), dev = fused, b.get_device()
    # rows a block: one wave where K allows, from X3H_ROWCOL_STEPS steps (fewer lost to the
    # barriers) up to X3H_ROWCOL_SM_ROWS an SM (each block's maxima take N atomics)
    per_sm = 1 if j >= geometry.X3H_ROWCOL_SOLO_J else geometry.X3H_ROWCOL_BLOCKS
    step_rows = geometry.X3H_ROWCOL_VECS // (2 * j)  # (the kernel's R)
    rows = min(
        geometry.X3H_ROWCOL_SM_ROWS // per_sm,
        max(step_rows * geometry.X3H_ROWCOL_STEPS, cdiv(k, per_sm * device_info(dev).sm_count)),
    )
    return [
        (
            handle(KERNELS, f"fp16x3_rowcolmax<{j}>", dev),
            (cdiv(k, rows), 1, 1),
            (threads, 1, 1),
            (b.data_ptr(), op.ld, k, n, rows, tk, acc, done, keys),
            0,
        )
    ]


def column_keys(x: torch.Tensor, ld: int, key: int, tk: int = 0, kneg: bool = False, tout: int = 0, done: int = 0):
    """fp16x3_colmax_n: the keys of the columns of ``x`` (rows, cols) fp32 (rows ``ld`` apart,
    16-byte aligned), row r shifted by ``tk``'s, atomicMax'd into ``key`` (int32, cols: zeroed
    first); with ``tout`` t of the columns there instead (int8, cols; ``done``: a zeroed
    uint32), ``key`` and ``done`` left zero. Its step."""
    rows, cols = x.shape
    return (
        handle(KERNELS, "fp16x3_colmax_n", x.get_device()),
        (
            cdiv(cols, 4 * geometry.X3H_NSPLIT_THREADS),
            min(cdiv(rows, geometry.X3H_COLMAX_ROWS), geometry.MAX_GRID_Y),
            1,
        ),
        (geometry.X3H_NSPLIT_THREADS, 1, 1),
        (x.data_ptr(), ld, rows, cols, tk, kneg, key, tout, done),
        0,
    )


def split_columns(b: torch.Tensor, op: Operand, key: int, hi: int, lo: int, ldn: int, ex: int, tk: int, kneg: bool):
    """fp16x3_split_n of a row-major ``b`` (K, N) fp32 (rows ``op.ld`` apart) into the pieces at
    ``hi`` / ``lo`` (fp16, (K, N) rows ``ldn`` apart) and the columns' exponents at ``ex``, row k
    times 2^-+t[k], by the columns' keys in ``key`` (int32, N: column_keys' with the same tk and
    kneg, or row_and_column_keys'). Its step."""
    k, n = b.shape
    return (
        handle(KERNELS, "fp16x3_split_n", b.get_device()),
        (cdiv(n, 4 * geometry.X3H_NSPLIT_THREADS), min(cdiv(k, geometry.X3H_NSPLIT_ROWS), geometry.MAX_GRID_Y), 1),
        (geometry.X3H_NSPLIT_THREADS, 1, 1),
        (b.data_ptr(), op.ld, k, n, key, hi, lo, ldn, ex, tk, kneg),
        0,
    )


def piece_ld(k: int) -> int:
    """Row length of the pieces of rows of ``k`` values: their tensor maps need 16-byte rows."""
    return cdiv(max(k, 1), 8) * 8


def carve(sizes: list[int]) -> tuple[list[int], int]:
    """Offsets of parts of ``sizes`` bytes laid out one after another from 256-byte boundaries
    (the TMA reads a matrix from a 16-byte one), and the bytes they take together."""
    offsets, end = [], 0
    for n in sizes:
        offsets.append(end)
        end += cdiv(n, 256) * 256
    return offsets, end


# How a call makes t (its first kernel) and B's columns' keys, by ``route``: "a": t from A's
# columns (fp16x3_colmax_n); "rowcol": t of B's rows and its columns' keys in one read
# (fp16x3_rowcolmax); "rows": t of B's rows (fp16x3_rowmax); "b": t from B's K-slices, columns of
# its K-major form (fp16x3_colmax_n). A row-major B's columns' keys (its N-major split) come
# from fp16x3_rowcolmax or, on "a" and "rows", from fp16x3_colmax_n, accumulated after it.


def route(p: GemmPlan, M: int, N: int) -> str:
    """How plan ``p`` of an M x N output makes t (above)."""
    if k_source(M, N) == "a":
        return "a"
    if p.b.prep != "n-major split":
        return "b"
    return "rowcol" if rowcol(N) else "rows"


def layout(p: GemmPlan, M: int, N: int, K: int) -> tuple[list[int], int]:
    """A call's one workspace (``carve``): A's pieces hi, lo and rows' exponents, B's the same,
    split-K's partial sums, t's bytes, B's columns' keys (N-major split), and last what the
    first kernel accumulates in, zero (``_DONE`` on: its count, then its keys), where no
    ``launch.accumulators`` are at hand."""
    n_major = p.b.prep == "n-major split"
    lda, ldb = piece_ld(K), piece_ld(N if n_major else K)  # pieces' rows: A's of K values, B's of N or K
    a_piece, b_piece = M * lda * 2, (K if n_major else N) * ldb * 2
    part = 4 * p.slices * M * N if p.slices > 1 else 0
    keys = 4 * N if n_major else 0
    return carve([a_piece, a_piece, 4 * M, b_piece, b_piece, 4 * N, part, K, keys, *accumulated(N, K)])


def accumulated(N: int, K: int) -> list[int]:
    """The sizes of what t's kernel accumulates in, zero and left zero: its count (uint32, first:
    at the same place for every shape, as ``launch.accumulators`` is shared) and its keys
    (int32, N or K)."""
    return [4, 4 * max(N, K)]


_TK, _KEYS, _DONE = 7, 8, 9  # layout's parts: t's bytes, B's columns' keys, the accumulators


def _accumulates_keys(way: str, n_major: bool) -> bool:
    """Whether a call accumulates B's columns' keys in the workspace (fp16x3_colmax_n after the
    first kernel: zeroed first)."""
    return n_major and way in ("a", "rows")


def _first(p: GemmPlan, way: str, a2, bt, tk: int, keys: int, z: int):
    """The call's first kernel, t's (``route`` ``way``) into ``tk``, and for "rowcol" B's
    columns' keys into ``keys``, accumulating at ``z`` (``accumulated``'s parts, ``carve``d: zero
    and left zero). ``a2`` is A as planned, ``bt`` B row-major (K, N) or (N, K) K-major."""
    done, acc = (z + o for o in carve(accumulated(0, 0))[0])  # (the keys' offset: any shape's)
    if way == "a":
        return column_keys(a2, p.a.ld, acc, tout=tk, done=done)
    if way == "b":
        return column_keys(bt, p.b.ld, acc, tout=tk, done=done)
    if way == "rowcol":
        return row_and_column_keys(bt, p.b, tk, keys, done, acc)[0]
    return row_shifts(bt, p.b, tk)


def _rest(p: GemmPlan, way: str, K: int, a2, bt, c, base: int, offsets: list[int], epi: tuple) -> list:
    """Every launch of a call after ``_first``'s, in order, over the workspace at ``base``
    (``layout``; B's columns' keys zeroed where ``_accumulates_keys``): the operands' splits,
    their tensor maps' GEMM and, for split-K, the reduction."""
    M, N = c.shape
    n_major = p.b.prep == "n-major split"
    lda, ldb = piece_ld(K), piece_ld(N if n_major else K)
    ahi, alo, ea, bhi, blo, eb, part, tk, keys = (base + o for o in offsets[:9])
    steps = []
    # the operand t came from split first: L2 still holds part of it (B's N-major split
    # 43 against 49 us at 4096^2, H100)
    if way == "a":
        steps.append(split_rows(a2, p.a, ahi, alo, lda, ea, tk, True))
    if n_major:  # each column's scale over the shifted rows
        if _accumulates_keys(way, n_major):
            steps.append(column_keys(bt, p.b.ld, keys, tk, kneg=way != "a"))
        steps.append(split_columns(bt, p.b, keys, bhi, blo, ldb, eb, tk, way != "a"))
        # boxes of 64 columns (128 bytes) x bk rows of K
        bmaps = tuple(tma.tensor_map_at(o, torch.float16, N, K, ldb, 64, p.bk) for o in (bhi, blo))
    else:
        steps.append(split_rows(bt, p.b, bhi, blo, ldb, eb, tk, way != "a"))
        bmaps = tuple(tma.tensor_map_at(o, torch.float16, K, N, ldb, p.bk, p.tile[1]) for o in (bhi, blo))
    if way != "a":
        steps.append(split_rows(a2, p.a, ahi, alo, lda, ea, tk, False))
    maps = tuple(tma.tensor_map_at(o, torch.float16, K, M, lda, p.bk, p.tile[0]) for o in (ahi, alo)) + bmaps
    return steps + _gemm(p, c, K, maps, ea, eb, epi, part)


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    """The operands' pieces (A's rows, B's columns) in one workspace allocation (one instead of
    five cut a call's host time by about a third: docs/gemm.md#fp16x3-workspace), its keys and
    accumulators zeroed, their tensor maps, the GEMM and, for split-K, the reduction."""
    (M, K), N = a.shape, b.shape[1]
    a2 = prepare(a, p.a)
    bt = b if p.b.prep == "n-major split" else prepare(b.t(), p.b)  # row-major (K, N) as is, or (N, K) K-major
    way = route(p, M, N)
    offsets, total = layout(p, M, N, K)
    ws = torch.empty(total, dtype=torch.uint8, device=c.device)
    base = ws.data_ptr()
    launch.memset(c.get_device(), base + offsets[_KEYS], total - offsets[_KEYS])
    first = _first(p, way, a2, bt, base + offsets[_TK], base + offsets[_KEYS], base + offsets[_DONE])
    for step in [first] + _rest(p, way, K, a2, bt, c, base, offsets, epi):
        launch.launch(*step)
    del ws, a2, bt  # launched: the stream orders any reuse of this memory after the kernel


def launcher(p: GemmPlan, device: int):
    """``run`` of plan ``p`` bound to ``device`` (``planner.launcher_for``): where both operands
    are read as they are (A K-major, B N-major or a Linear's ``weight.T``), the layout is worked
    out once and every step of a call, the tensor maps among them, packed once per address set
    (A, B, C, the workspace, the accumulators, the epilogue's arguments). Its ``start(a, b)``
    allocates the workspace and launches t's kernel over the stream's ``launch.accumulators``
    (no memset before it) and returns ``finish(c, epi)``, which launches the rest: a caller
    allocates C in between, while the GPU works (docs/design.md#host-cost). ``fn(a, b, c, epi)``
    is the two in one. Other plans run ``run`` as it is."""
    if p.a.prep != "as is" or p.b.prep not in ("n-major split", "as is"):
        return lambda a, b, c, epi: run(p, a, b, c, epi)
    firsts: dict[tuple, list] = {}
    rests: dict[tuple, list] = {}
    lay = None  # the route, layout and bytes accumulated, worked out on the first call (one shape's)
    n_major = p.b.prep == "n-major split"
    uint8 = torch.uint8

    def start(a, b):
        nonlocal lay
        if lay is None:  # (threads racing here each work it out: one assignment, no append)
            M, N, K = a.shape[0], b.shape[1], a.shape[1]
            way = route(p, M, N)
            lay = (way, *layout(p, M, N, K), carve(accumulated(N, K))[1], _accumulates_keys(way, n_major))
        way, offsets, total, nacc, zero_keys = lay
        bt = b if n_major else b.t()
        ws = torch.empty(total, dtype=uint8, device=a.device)
        base = ws.data_ptr()
        z = launch.accumulators(device, nacc)
        if z is None:  # (capturing a graph) the workspace's, zeroed, as run's
            launch.memset(device, base + offsets[_KEYS], total - offsets[_KEYS])
            z = base + offsets[_DONE]
        key = (a.data_ptr(), b.data_ptr(), base, z)
        launch_steps(firsts, key, lambda: [_first(p, way, a, bt, base + offsets[_TK], base + offsets[_KEYS], z)])
        if zero_keys and z != base + offsets[_DONE]:
            launch.memset(device, base + offsets[_KEYS], offsets[_DONE] - offsets[_KEYS])

        def finish(c, epi):
            key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), ws.data_ptr(), epi[2])  # (ws held till here)
            launch_steps(rests, key, lambda: _rest(p, way, a.shape[1], a, bt, c, base, offsets, epi))
            # launched: the stream orders any reuse of ws's memory after the kernels

        return finish

    def go(a, b, c, epi):
        start(a, b)(c, epi)

    go.start = start
    return go


def _gemm(p: GemmPlan, c, K: int, maps: tuple, ea: int, eb: int, epi: tuple, part: int) -> list:
    """The steps of gemm_fp16x3 of ``c`` (M, N) over K, the pieces behind ``maps`` (A's hi, lo,
    B's hi, lo) and their rows' exponents at ``ea`` / ``eb``; for split-K, the partial sums at
    ``part`` and the reduction."""
    M, N = c.shape
    h = handle(KERNELS, p.kernel, c.get_device())
    if p.slices > 1:
        return [
            (h, p.grid, p.block, maps + (part, M, N, K, p.kslice, ea, eb, p.group), p.smem),
            reduce_step(p, part, c, epi),
        ]
    return [(h, p.grid, p.block, maps + (c.data_ptr(), N, M, N, K, ea, eb, *epi, p.group), p.smem)]


# --- prepacked weights (docs/prepack.md) ----------------------------------------------------


class Pieces:
    """A weight's fp16x3 pieces, B of ``x @ weight.T`` split once: ``weight`` (N, K) float32's
    rows as fp16 hi and lo (N rows of ``piece_ld(K)``), each row's scale exponent (int32, N) and
    t of its columns (int8, K: B's K-slices, so A's split needs nothing of B's values), in one
    allocation of ``nbytes`` (about the weight's own size)."""

    def __init__(self, weight: torch.Tensor):
        n, k = weight.shape
        op = kmajor_operand(Matrix.of(weight))
        rows = prepare(weight, op)
        self.n, self.k, self.ld = n, k, piece_ld(k)
        piece = n * self.ld * 2
        (hi, lo, eb, tkey, done, tk), total = carve([piece, piece, 4 * n, 4 * k, 4, k])
        self.ws = ws = torch.empty(total, dtype=torch.uint8, device=weight.device)
        self.nbytes = total
        base = ws.data_ptr()
        self.hi, self.lo, self.eb, self.tk = base + hi, base + lo, base + eb, base + tk
        launch.memset(weight.get_device(), base + tkey, tk - tkey)  # t's keys and their count
        launch.launch(*column_keys(rows, op.ld, base + tkey, tout=self.tk, done=base + done))
        launch.launch(*split_rows(rows, op, self.hi, self.lo, self.ld, self.eb, self.tk, True))
        del rows  # (a copy where the weight's rows were not K-major: the stream orders its reuse)


def run_packed(p: GemmPlan, a: torch.Tensor, pieces: Pieces, c: torch.Tensor, epi: tuple) -> None:
    """``c`` = epilogue(``a @ weight.T``) by a plan of ``b_packed`` (``p.b.prep`` "prepacked")
    over ``pieces``, the weight's: A alone is split (times 2^t[k] of the weight's t)."""
    M, K = a.shape
    a2 = prepare(a, p.a)
    lda = piece_ld(K)
    part = 4 * p.slices * M * pieces.n if p.slices > 1 else 0
    (ahi, alo, ea, partial), total = carve([M * lda * 2, M * lda * 2, 4 * M, part])
    ws = torch.empty(total, dtype=torch.uint8, device=c.device)
    base = ws.data_ptr()
    steps = [split_rows(a2, p.a, base + ahi, base + alo, lda, base + ea, pieces.tk, False)]
    maps = tuple(tma.tensor_map_at(base + o, torch.float16, K, M, lda, p.bk, p.tile[0]) for o in (ahi, alo))
    maps += tuple(
        tma.tensor_map_at(o, torch.float16, K, pieces.n, pieces.ld, p.bk, p.tile[1]) for o in (pieces.hi, pieces.lo)
    )
    after = [after_step(p.after, c, epi)] if p.after else []
    for step in steps + _gemm(p, c, K, maps, base + ea, pieces.eb, epi, base + partial) + after:
        launch.launch(*step)
    del ws, a2
