"""fp16x3's passes one at a time, as the tests check them against their definition: the pieces
and exponents of A's rows (or of a row-major B's columns) and the shifts along K, in tensors of
their own rather than in the one workspace a GEMM carves (each pass is a step, launched here)."""

from __future__ import annotations

import torch

from cupy_ops import launch
from cupy_ops.ops.gemm.common import Operand
from cupy_ops.ops.gemm.fp16x3 import column_keys, piece_ld, row_and_column_keys, row_shifts, split_columns, split_rows
from cupy_ops.ops.gemm.runtime import prepare


def pieces(
    t: torch.Tensor, op: Operand, tk: torch.Tensor | None = None, kneg: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pieces, exponents)``: ``t`` (rows, K) fp32 split by fp16x3_split into ``pieces``
    (2, rows, K rounded up to 8) fp16, hi then lo, of ``t``'s rows, value k times 2^tk[k]
    (``tk``: int8 (K,), or none; ``kneg``: 2^-tk[k]), scaled by 2^exponents[row] (int32,
    (rows,)); ``t`` first in the tensor-core form ``op`` planned (K-major rows)."""
    t = prepare(t, op)
    out = torch.empty((2, t.shape[0], piece_ld(t.shape[1])), dtype=torch.float16, device=t.device)
    ex = torch.empty((t.shape[0],), dtype=torch.int32, device=t.device)
    step = split_rows(
        t,
        op,
        out[0].data_ptr(),
        out[1].data_ptr(),
        out.shape[2],
        ex.data_ptr(),
        0 if tk is None else tk.data_ptr(),
        kneg,
    )
    launch.launch(*step)
    return out, ex


def pieces_n(
    b: torch.Tensor, op: Operand, tk: torch.Tensor | str | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(pieces, exponents, tk)``: a row-major ``b`` (K, N) fp32 (rows ``op.ld`` apart, 16-byte
    aligned) split N-major by fp16x3_colmax_n and fp16x3_split_n into ``pieces`` (2, K, N
    rounded up to 8) fp16, hi then lo, of ``b``'s rows times 2^-tk[k] (``tk``: int8 (K,), or
    none; ``"rows"``: t of ``b``'s own rows, with the columns' keys, as matmul takes them:
    row_and_column_keys) and columns scaled by 2^exponents[n]."""
    k, n = b.shape
    out = torch.empty((2, k, piece_ld(n)), dtype=torch.float16, device=b.device)
    ex = torch.empty((n,), dtype=torch.int32, device=b.device)
    key = torch.zeros((n,), dtype=torch.int32, device=b.device)
    if isinstance(tk, str):
        tk = torch.empty((k,), dtype=torch.int8, device=b.device)
        acc = torch.zeros((n + 1,), dtype=torch.int32, device=b.device)  # the count, then the keys accumulated
        steps = row_and_column_keys(b, op, tk.data_ptr(), key.data_ptr(), acc.data_ptr(), acc.data_ptr() + 4)
    else:
        steps = [column_keys(b, op.ld, key.data_ptr(), 0 if tk is None else tk.data_ptr(), kneg=True)]
    steps.append(
        split_columns(
            b,
            op,
            key.data_ptr(),
            out[0].data_ptr(),
            out[1].data_ptr(),
            out.shape[2],
            ex.data_ptr(),
            0 if tk is None else tk.data_ptr(),
            True,
        )
    )
    for step in steps:
        launch.launch(*step)
    return out, ex, tk


def b_shifts(b: torch.Tensor, op: Operand) -> torch.Tensor:
    """t of ``b``'s (K, N) rows (int8, (K,)): fp16x3_rowmax of a row-major ``b`` (``op`` an
    N-major split), else fp16x3_colmax_n over the columns of its K-major form."""
    tk = torch.empty((b.shape[0],), dtype=torch.int8, device=b.device)
    if op.prep == "n-major split":
        launch.launch(*row_shifts(b, op, tk.data_ptr()))
    else:
        scratch = torch.zeros((b.shape[0] + 1,), dtype=torch.int32, device=b.device)  # keys, then the count
        t = prepare(b.t(), op)
        launch.launch(
            *column_keys(t, op.ld, scratch.data_ptr(), tout=tk.data_ptr(), done=scratch.data_ptr() + 4 * b.shape[0])
        )
    return tk
