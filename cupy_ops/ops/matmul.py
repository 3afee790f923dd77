"""matmul: ``torch.matmul`` for 2-D operands, through the one GEMM plan (ops/gemm_plan.py)."""
from __future__ import annotations

import torch

from .. import checks
from . import gemm
from .gemm_plan import ALGOS


def matmul(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto") -> torch.Tensor:
    """``a @ b`` for 2-D CUDA tensors, accumulating in fp32 (fp64 for float64).

    Args:
        a: (M, K) tensor, float32 / float16 / bfloat16 / float64, any strides (the CUDA-core
           kernels read ``a.t()``, slices and other views in place; the tensor-core kernels
           copy an operand once when its rows are not K-contiguous and 16-byte aligned, except
           the Hopper kernel's row-major ``b``, read in place: 16-bit through the instruction's
           transpose bit, TF32 (rows 16-byte aligned, N a multiple of 4) by computing
           C^T = B^T A^T).
        b: (K, N) tensor of ``a``'s dtype and device, any strides.
        algo: ``"auto"`` (default): the fastest correct kernel for the dtype: tensor cores
            for float16 / bfloat16, and for float32 only where torch allows TF32
            (``torch.backends.cuda.matmul.allow_tf32`` or ``torch.set_float32_matmul_precision``
            not "highest"), else the tiled fp32 CUDA-core kernel (``"simt"``). The tensor-core
            kernel is ``"wgmma"`` (wgmma + TMA) on Hopper, ``"tc"`` (mma.sync) elsewhere; both
            can be asked for by name (``"wgmma"`` on compute capability 9.0 only). ``"tf32x3"``
            (float32, compute capability 9.0): fp32 accuracy on the tensor cores, each operand
            split into two TF32 numbers and three TF32 products summed: max error against fp64
            at most torch fp32's at the benchmark shapes (1024^3 to 4096^3), and within 2^-18
            of the largest output at any shape (torch's is smaller at small K); NaN and inf
            where torch fp32 puts them; a subnormal input counts as +-2^-125 (tensor cores
            cannot hold it); ~1.9x torch fp32's speed on an H100 at 4096^3. ``"fp16x3"``
            (float32, compute capability 9.0): the same accuracy from the fp16 tensor cores,
            twice TF32's rate: each row of ``a`` and column of ``b`` scaled by a power of two
            that brings its largest finite magnitude X to [2^14, 2^15), split into two fp16
            numbers (a pass over both operands, workspaces of their size), three fp16
            products summed: max error against fp64 at most torch fp32's at the benchmark
            shapes (0.2-0.6x on randn and rand); NaN and inf where torch fp32 puts them; a
            value x keeps 21 bits where |x| >= 2^-18 X, an absolute error up to 2^-38 X below
            (so rows spanning more than ~2^17 lose precision torch keeps); ~3.3-3.6x torch fp32's
            speed on an H100 at 4096^3, slower than "tf32x3" below ~2^33 multiply-adds (the
            split pass). ``"naive"``: the
            reference kernel, one thread per output element. ``cupy_ops.gemm_plan(a, b)`` says
            which kernel a call takes.
    Returns:
        A contiguous (M, N) tensor of ``a``'s dtype; zeros when K == 0.
    Raises:
        TypeError: an operand is not a tensor, or the dtypes are unsupported or differ.
        ValueError: an operand is not 2-D, K differs, an operand is not on CUDA or they are
            on different devices, ``algo`` is unknown or does not fit the dtype, size or GPU.
    """
    checks.matmul_args(a, b, algo, ALGOS)
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    if M and N:
        gemm.run(gemm.plan_for(a, b, "EpiNone", algo), a, b, c)
    return c
