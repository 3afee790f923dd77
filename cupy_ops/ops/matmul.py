"""matmul: ``torch.matmul`` (1-D, 2-D, batched and broadcast operands), through the GEMM
families (ops/gemm/; the batch: ops/gemm/batch.py)."""

from __future__ import annotations

import torch

from .. import checks
from ..op import op
from . import gemm

_is_compiling = torch.compiler.is_compiling


def _output(a, b, algo):
    return a.new_empty(checks.matmul_args(a, b, algo, gemm.ALGOS))


def _fast(a, b, algo):
    return gemm.product(a, b, algo, checks.matmul_args)


@op("cupy_ops::matmul", output=_output, autocast="lower", contiguous=False, check_devices=False, fast=_fast)
def _matmul(a: torch.Tensor, b: torch.Tensor, algo: str = "auto", *, out: torch.Tensor) -> None:
    gemm.matmul_into(a, b, out, "EpiNone", algo)


def _as_matrices(a, b, grad):
    """``a``, ``b`` and ``grad`` with the dimensions torch.matmul removes put back: a 1-D ``a``
    a row (1, K), a 1-D ``b`` a column (K, 1), ``grad`` then of shape batch + (M, N)."""
    if b.dim() == 1:
        b, grad = b.unsqueeze(-1), grad.unsqueeze(-1)
    if a.dim() == 1:
        a, grad = a.unsqueeze(0), grad.unsqueeze(-2)
    return a, b, grad


@_matmul.backward(save=("a", "b", "algo"))
def _(ctx, grad):
    a, b, g = _as_matrices(ctx.a, ctx.b, grad)
    da = db = None
    if ctx.needs_grad("a"):
        # a broadcast batch of a sums over the entries it served (sum_to_size)
        da = matmul(g, b.mT, algo=ctx.algo).sum_to_size(a.shape).reshape(ctx.a.shape)
    if ctx.needs_grad("b"):
        if b.dim() == 2:
            # b served every row of a's batch: one GEMM over the folded rows
            K, N = b.shape
            rows = checks.prod(a.shape[:-1])
            db = matmul(a.reshape(rows, K).mT, g.reshape(rows, N), algo=ctx.algo)
        else:
            db = matmul(a.mT, g, algo=ctx.algo).sum_to_size(b.shape)
        db = db.reshape(ctx.b.shape)
    return da, db, None


@_matmul.jvp(save=("a", "b", "algo"))
def _(ctx, ta, tb, t_algo):
    parts = [
        matmul(ta, ctx.b, algo=ctx.algo) if ta is not None else None,
        matmul(ctx.a, tb, algo=ctx.algo) if tb is not None else None,
    ]
    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def batch_entries(info, in_dims, *tensors):
    """``torch.func.vmap`` rule helper: for each batch entry, the tensors' slices (an unbatched
    tensor as it is)."""
    moved = [t.movedim(d, 0) if d is not None else t for t, d in zip(tensors, in_dims)]
    return [[t[i] if d is not None else t for t, d in zip(moved, in_dims)] for i in range(info.batch_size)]


@_matmul.vmap
def _(info, in_dims, a, b, algo):
    # the vmapped dimension becomes the leftmost batch dimension of one batched matmul: each
    # batched operand moved to the front, a 1-D one made a row / column (squeezed after), and
    # padded with size-1 dimensions to the other's rank so that batch dimensions line up
    (da, db), ta, tb = in_dims[:2], a, b
    ra, rb = a.dim() - (da is not None), b.dim() - (db is not None)
    if da is not None:
        ta = a.movedim(da, 0)
        if ra == 1:
            ta = ta.unsqueeze(1)
    if db is not None:
        tb = b.movedim(db, 0)
        if rb == 1:
            tb = tb.unsqueeze(-1)
    rank = max(max(ra, 2) if da is not None else ra, max(rb, 2) if db is not None else rb)
    if da is not None:
        ta = ta.reshape(ta.shape[:1] + (1,) * (rank + 1 - ta.dim()) + ta.shape[1:])
    if db is not None:
        tb = tb.reshape(tb.shape[:1] + (1,) * (rank + 1 - tb.dim()) + tb.shape[1:])
    out = matmul(ta, tb, algo=algo)
    if db is not None and rb == 1:
        out = out.squeeze(-1)
    if da is not None and ra == 1:
        out = out.squeeze(-1 if rb == 1 else -2)
    return out, 0


def matmul(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto") -> torch.Tensor:
    """``torch.matmul(a, b)`` for CUDA tensors, accumulating in fp32 (fp64 for float64).

    torch.matmul's shapes: 1-D x 1-D (a 0-dim result), 2-D x 1-D, 1-D x 2-D (the added
    dimension removed from the result), 2-D x 2-D, and batched operands (the dimensions before
    the last two) with their batch dimensions broadcast, any strides, empty batches. Where ``b``
    has no batch, ``a``'s batch dimensions fold into M: one GEMM, on a view where ``a``'s strides
    allow (else ``a`` is copied, as torch copies it); otherwise a batched kernel (the batch in
    the grid, one batch stride per operand: ``naive``, ``simt``, ``tc``, ``wgmma``) or, for
    the other families and operands those do not read in place, one GEMM per batch entry, each
    on views (a broadcast batch dimension is never copied). ``cupy_ops.gemm_plan(a, b)`` says which.

    Differentiable to any order (both modes); ``torch.func.vmap`` (the vmapped dimension
    becomes a batch dimension); traceable by torch.compile as ``cupy_ops::matmul``. Under
    ``torch.autocast("cuda")`` float32 operands are cast to the autocast dtype first, as torch's
    matmul casts them.

    Args:
        a: (*, M, K) or (K,) tensor, float32 / float16 / bfloat16 / float64, any strides (the CUDA-core
           kernels read ``a.t()``, slices and other views in place; the tensor-core kernels
           copy an operand once when its rows are not K-contiguous and 16-byte aligned, except
           the Hopper kernel's row-major ``b``, read in place: 16-bit through the instruction's
           transpose bit, TF32 (rows 16-byte aligned, N a multiple of 4) by computing
           C^T = B^T A^T).
        b: (*, K, N) or (K,) tensor of ``a``'s dtype and device, any strides; the batch
            dimensions ``*`` of ``a`` and ``b`` broadcast.
        algo: ``"auto"`` (default): as torch decides: tensor cores for float16 / bfloat16,
            and for float32 only where torch allows TF32 (``allow_tf32`` or
            ``set_float32_matmul_precision`` not "highest"), else the fp32 CUDA-core kernel
            ``"simt"``; float64 and sizes past the tiled kernels' limits ``"naive"``.
            ``"accurate"``: as "auto", but float32 at fp32 accuracy whatever the TF32 switch:
            ``"fp16x3"`` or ``"tf32x3"`` on Hopper (the faster for the size), else ``"simt"``.
            A family by name: ``"wgmma"`` (Hopper) / ``"tc"`` tensor cores, ``"tf32x3"`` and
            ``"fp16x3"`` (float32 at fp32 accuracy on the Hopper tensor cores: their error model
            and its limits, docs/numerics.md), ``"simt"``, ``"naive"`` (one thread per output,
            the reference). ``cupy_ops.gemm_plan(a, b)`` says which kernel a call takes;
            docs/gemm.md how each is chosen.
    Returns:
        A contiguous tensor of ``a``'s dtype, of torch.matmul's shape (broadcast batch + (M, N),
            M / N left out for a 1-D ``a`` / ``b``); zeros when K == 0.
    Raises:
        TypeError: an operand is not a tensor, or the dtypes are unsupported; the dtypes
            differ (``checks.DtypeMismatch``, also a ``RuntimeError`` as torch raises it).
        ValueError: a 0-dim operand, K differs, the batch dimensions do not broadcast
            (``checks.ShapeError``, also a ``RuntimeError`` as torch raises it, in torch's
            words); an operand is not on CUDA or they are on different devices, ``algo`` is
            unknown or does not fit the dtype, size or GPU.

    Example:
        >>> a, b = torch.randn(64, 32, device="cuda"), torch.randn(32, 16, device="cuda")
        >>> c = cupy_ops.matmul(a, b)                 # algo="auto": follows torch's TF32 switch
        >>> print(cupy_ops.gemm_plan(a, b))           # which kernel that call took
    """
    if _is_compiling():
        return _matmul(a, b, algo)
    return _matmul.call((a, b, algo))
