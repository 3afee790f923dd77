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

from ... import launch
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
from .runtime import SM90A, declare, device_info, handle, prepare, reduce
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


def split_rows(
    x: torch.Tensor, op: Operand, hi: int, lo: int, ldo: int, ex: int, tk: int = 0, kneg: bool = False
) -> None:
    """fp16x3_split of ``x`` (rows, K) fp32, K-major rows ``op.ld`` apart, into the pieces at
    device addresses ``hi`` / ``lo`` (fp16, rows ``ldo`` apart) and the rows' exponents at ``ex``
    (int32)."""
    rows, k = x.shape
    launch.launch(
        handle(KERNELS, "fp16x3_split", x.get_device()),
        (rows, 1, 1),
        (geometry.X3H_SPLIT_THREADS, 1, 1),
        (x.data_ptr(), op.ld, rows, k, hi, lo, ldo, ex, tk, kneg),
    )


def row_shifts(b: torch.Tensor, op: Operand, tk: int) -> None:
    """fp16x3_rowmax: t of a row-major ``b`` (K, N) fp32's rows (``op.ld`` apart) into ``tk``
    (int8, K)."""
    k, n = b.shape
    launch.launch(
        handle(KERNELS, "fp16x3_rowmax", b.get_device()),
        (cdiv(k, geometry.X3H_NSPLIT_THREADS // 32), 1, 1),
        (geometry.X3H_NSPLIT_THREADS, 1, 1),
        (b.data_ptr(), op.ld, k, n, tk),
    )


def rowcol(n: int) -> tuple[int, int] | None:
    """fp16x3_rowcolmax's (J, threads) for rows of ``n`` values: J float4 a thread, the fewest
    whole warps that hold a row; None where no block can (or ``n`` is 0)."""
    for j in geometry.X3H_ROWCOL_JS:
        if 0 < n <= 4 * j * geometry.X3H_ROWCOL_THREADS:
            return j, cdiv(cdiv(n, 4 * j), 32) * 32
    return None


def row_and_column_keys(b: torch.Tensor, op: Operand, tk: int, key: int) -> None:
    """t of a row-major ``b`` (K, N) fp32's rows (``op.ld`` apart, 16-byte aligned) into ``tk``
    (int8, K) and its columns' keys over the rows times 2^-t[k] into ``key`` (int32, N: zeroed
    first): fp16x3_rowcolmax, one read of ``b``, where a block holds a row (``rowcol``), else
    fp16x3_rowmax, then fp16x3_colmax_n."""
    k, n = b.shape
    fused = rowcol(n)
    if fused is None:
        row_shifts(b, op, tk)
        column_keys(b, op.ld, key, tk, kneg=True)
        return
    if k == 0:
        return
    (j, threads), dev = fused, b.get_device()
    # rows a block: two blocks an SM where K allows, from X3H_ROWCOL_STEPS steps (fewer lost
    # to the barriers) up to X3H_ROWCOL_ROWS (each block's maxima take N atomics)
    rows = min(
        geometry.X3H_ROWCOL_ROWS,
        max(geometry.X3H_ROWCOL_VECS // j * geometry.X3H_ROWCOL_STEPS, cdiv(k, 2 * device_info(dev).sm_count)),
    )
    launch.launch(
        handle(KERNELS, f"fp16x3_rowcolmax<{j}>", dev),
        (cdiv(k, rows), 1, 1),
        (threads, 1, 1),
        (b.data_ptr(), op.ld, k, n, rows, tk, key),
    )


def column_keys(
    x: torch.Tensor, ld: int, key: int, tk: int = 0, kneg: bool = False, tout: int = 0, done: int = 0
) -> None:
    """fp16x3_colmax_n: the keys of the columns of ``x`` (rows, cols) fp32 (rows ``ld`` apart,
    16-byte aligned), row r shifted by ``tk``'s, atomicMax'd into ``key`` (int32, cols: zeroed
    first); with ``tout`` also t of the columns there (int8, cols; ``done``: a zeroed uint32)."""
    rows, cols = x.shape
    launch.launch(
        handle(KERNELS, "fp16x3_colmax_n", x.get_device()),
        (
            cdiv(cols, 4 * geometry.X3H_NSPLIT_THREADS),
            min(cdiv(rows, geometry.X3H_COLMAX_ROWS), geometry.MAX_GRID_Y),
            1,
        ),
        (geometry.X3H_NSPLIT_THREADS, 1, 1),
        (x.data_ptr(), ld, rows, cols, tk, kneg, key, tout, done),
    )


def split_columns(
    b: torch.Tensor, op: Operand, key: int, hi: int, lo: int, ldn: int, ex: int, tk: int = 0, kneg: bool = True
) -> None:
    """fp16x3_split_n of a row-major ``b`` (K, N) fp32 (rows ``op.ld`` apart) into the pieces at
    ``hi`` / ``lo`` (fp16, (K, N) rows ``ldn`` apart) and the columns' exponents at ``ex``, row k
    times 2^-+t[k], by the columns' keys in ``key`` (int32, N: column_keys' with the same tk and
    kneg, or row_and_column_keys')."""
    k, n = b.shape
    launch.launch(
        handle(KERNELS, "fp16x3_split_n", b.get_device()),
        (cdiv(n, 4 * geometry.X3H_NSPLIT_THREADS), min(cdiv(k, geometry.X3H_NSPLIT_ROWS), geometry.MAX_GRID_Y), 1),
        (geometry.X3H_NSPLIT_THREADS, 1, 1),
        (b.data_ptr(), op.ld, k, n, key, hi, lo, ldn, ex, tk, kneg),
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


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    """The operands' pieces (A's rows, B's columns) in one workspace allocation (one instead of
    five cut a call's host time by about a third: docs/gemm.md#fp16x3-workspace), their tensor
    maps, the GEMM and, for split-K, the reduction."""
    (M, K), N = a.shape, b.shape[1]
    n_major = p.b.prep == "n-major split"
    a2 = prepare(a, p.a)
    bt = b if n_major else prepare(b.t(), p.b)  # row-major (K, N) as is, or (N, K) K-major
    lda, ldb = piece_ld(K), piece_ld(N if n_major else K)  # pieces' rows: A's of K values, B's of N or K
    b_rows = K if n_major else N  # rows of B's pieces
    a_piece, b_piece = M * lda * 2, b_rows * ldb * 2
    # B's columns' keys (N-major), t's keys and their count, zeroed by one memset; t's bytes
    (ahi, alo, ea, bhi, blo, eb, key, tkey, done, tk), total = carve(
        [a_piece, a_piece, 4 * M, b_piece, b_piece, 4 * N, 4 * N if n_major else 0, 4 * K, 4, K]
    )
    ws = torch.empty((total,), dtype=torch.uint8, device=c.device)
    base = ws.data_ptr()
    ws[key:tk].zero_()
    from_a = k_source(M, N) == "a"
    if from_a or not n_major:  # A's columns, or B's rows as B^T's columns
        src, op = (a2, p.a) if from_a else (bt, p.b)
        column_keys(src, op.ld, base + tkey, tout=base + tk, done=base + done)
    else:  # t of B's rows, and its columns' keys over the rows shifted, in one read
        row_and_column_keys(bt, p.b, base + tk, base + key)
    # the operand t came from split first: L2 still holds part of it (B's N-major split
    # 43 against 49 us at 4096^2, H100)
    if from_a:
        split_rows(a2, p.a, base + ahi, base + alo, lda, base + ea, base + tk, True)
    if n_major:  # each column's scale over the shifted rows
        if from_a:
            column_keys(bt, p.b.ld, base + key, base + tk, kneg=False)
        split_columns(bt, p.b, base + key, base + bhi, base + blo, ldb, base + eb, base + tk, not from_a)
        # boxes of 64 columns (128 bytes) x bk rows of K
        bmaps = tuple(tma.tensor_map_at(base + o, torch.float16, N, K, ldb, 64, p.bk) for o in (bhi, blo))
    else:
        split_rows(bt, p.b, base + bhi, base + blo, ldb, base + eb, base + tk, not from_a)
        bmaps = tuple(tma.tensor_map_at(base + o, torch.float16, K, N, ldb, p.bk, p.tile[1]) for o in (bhi, blo))
    if not from_a:
        split_rows(a2, p.a, base + ahi, base + alo, lda, base + ea, base + tk, False)
    maps = tuple(tma.tensor_map_at(base + o, torch.float16, K, M, lda, p.bk, p.tile[0]) for o in (ahi, alo)) + bmaps
    _gemm(p, c, K, maps, base + ea, base + eb, epi)
    del ws, a2, bt  # launched: the stream orders any reuse of this memory after the kernel


def _gemm(p: GemmPlan, c, K: int, maps: tuple, ea: int, eb: int, epi: tuple) -> None:
    """gemm_fp16x3 of ``c`` (M, N) over K, the pieces behind ``maps`` (A's hi, lo, B's hi, lo)
    and their rows' exponents at ``ea`` / ``eb``; for split-K, the partial sums and the
    reduction."""
    M, N = c.shape
    h = handle(KERNELS, p.kernel, c.get_device())
    if p.slices > 1:
        part = torch.empty((p.slices, M, N), dtype=torch.float32, device=c.device)
        launch.launch(h, p.grid, p.block, maps + (part.data_ptr(), M, N, K, p.kslice, ea, eb, p.group), p.smem)
        reduce(p, part, c, epi)
    else:
        launch.launch(h, p.grid, p.block, maps + (c.data_ptr(), N, M, N, K, ea, eb, *epi, p.group), p.smem)


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
        self.ws = ws = torch.empty((total,), dtype=torch.uint8, device=weight.device)
        self.nbytes = total
        base = ws.data_ptr()
        self.hi, self.lo, self.eb, self.tk = base + hi, base + lo, base + eb, base + tk
        ws[tkey:tk].zero_()
        column_keys(rows, op.ld, base + tkey, tout=self.tk, done=base + done)
        split_rows(rows, op, self.hi, self.lo, self.ld, self.eb, self.tk, True)
        del rows  # (a copy where the weight's rows were not K-major: the stream orders its reuse)


def run_packed(p: GemmPlan, a: torch.Tensor, pieces: Pieces, c: torch.Tensor, epi: tuple) -> None:
    """``c`` = epilogue(``a @ weight.T``) by a plan of ``b_packed`` (``p.b.prep`` "prepacked")
    over ``pieces``, the weight's: A alone is split (times 2^t[k] of the weight's t)."""
    M, K = a.shape
    a2 = prepare(a, p.a)
    lda = piece_ld(K)
    (ahi, alo, ea), total = carve([M * lda * 2, M * lda * 2, 4 * M])
    ws = torch.empty((total,), dtype=torch.uint8, device=c.device)
    base = ws.data_ptr()
    split_rows(a2, p.a, base + ahi, base + alo, lda, base + ea, pieces.tk, False)
    maps = tuple(tma.tensor_map_at(base + o, torch.float16, K, M, lda, p.bk, p.tile[0]) for o in (ahi, alo))
    maps += tuple(
        tma.tensor_map_at(o, torch.float16, K, pieces.n, pieces.ld, p.bk, p.tile[1]) for o in (pieces.hi, pieces.lo)
    )
    _gemm(p, c, K, maps, base + ea, pieces.eb, epi)
    del ws, a2
