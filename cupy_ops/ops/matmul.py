"""matmul: ``torch.matmul`` for 2-D operands, through the GEMM families (ops/gemm/)."""
from __future__ import annotations

import torch

from .. import checks
from ..op import op
from . import gemm

_is_compiling = torch.compiler.is_compiling


def _output(a, b, algo):
    checks.matmul_args(a, b, algo, gemm.ALGOS)
    return a.new_empty((a.shape[0], b.shape[1]))


@op("cupy_ops::matmul", output=_output, autocast="lower", contiguous=False, check_devices=False)
def _matmul(a: torch.Tensor, b: torch.Tensor, algo: str = "auto", *, out: torch.Tensor) -> None:
    if out.shape[0] and out.shape[1]:
        gemm.run(gemm.plan_for(a, b, "EpiNone", algo), a, b, out)


@_matmul.backward(save=("a", "b", "algo"))
def _(ctx, grad):
    da = matmul(grad, ctx.b.t(), algo=ctx.algo) if ctx.needs_grad("a") else None
    db = matmul(ctx.a.t(), grad, algo=ctx.algo) if ctx.needs_grad("b") else None
    return da, db, None


@_matmul.jvp(save=("a", "b", "algo"))
def _(ctx, ta, tb, t_algo):
    parts = [matmul(ta, ctx.b, algo=ctx.algo) if ta is not None else None,
             matmul(ctx.a, tb, algo=ctx.algo) if tb is not None else None]
    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else parts[0] + parts[1]


def batch_entries(info, in_dims, *tensors):
    """``torch.func.vmap`` rule helper: for each batch entry, the tensors' slices (an unbatched
    tensor as it is)."""
    moved = [t.movedim(d, 0) if d is not None else t for t, d in zip(tensors, in_dims)]
    return [[t[i] if d is not None else t for t, d in zip(moved, in_dims)] for i in range(info.batch_size)]


@_matmul.vmap
def _(info, in_dims, a, b, algo):
    # one product per batch entry (no batched GEMM kernel yet)
    return torch.stack([matmul(p, q, algo=algo) for p, q in batch_entries(info, in_dims, a, b)]), 0


MATMUL = _matmul


def matmul(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto") -> torch.Tensor:
    """``a @ b`` for 2-D CUDA tensors, accumulating in fp32 (fp64 for float64).

    Differentiable to any order (both modes); ``torch.func.vmap`` (one product per batch
    entry); traceable by torch.compile as ``cupy_ops::matmul``. Under ``torch.autocast("cuda")``
    float32 operands are cast to the autocast dtype first, as torch's matmul casts them.

    Args:
        a: (M, K) tensor, float32 / float16 / bfloat16 / float64, any strides (the CUDA-core
           kernels read ``a.t()``, slices and other views in place; the tensor-core kernels
           copy an operand once when its rows are not K-contiguous and 16-byte aligned, except
           the Hopper kernel's row-major ``b``, read in place: 16-bit through the instruction's
           transpose bit, TF32 (rows 16-byte aligned, N a multiple of 4) by computing
           C^T = B^T A^T).
        b: (K, N) tensor of ``a``'s dtype and device, any strides.
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
        A contiguous (M, N) tensor of ``a``'s dtype; zeros when K == 0.
    Raises:
        TypeError: an operand is not a tensor, or the dtypes are unsupported or differ.
        ValueError: an operand is not 2-D, K differs, an operand is not on CUDA or they are
            on different devices, ``algo`` is unknown or does not fit the dtype, size or GPU.

    Example:
        >>> a, b = torch.randn(64, 32, device="cuda"), torch.randn(32, 16, device="cuda")
        >>> c = cupy_ops.matmul(a, b)                 # algo="auto": follows torch's TF32 switch
        >>> print(cupy_ops.gemm_plan(a, b))           # which kernel that call took
    """
    if _is_compiling():
        return _matmul(a, b, algo)
    return _matmul._call((a, b, algo))
