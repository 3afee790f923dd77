"""linear_relu_div: ``torch.relu(F.linear(x, weight, bias)) / divisor`` with bias, ReLU and
divide fused in the GEMM's epilogue, through the one GEMM plan (ops/gemm_plan.py)."""
from __future__ import annotations

import torch

from .. import checks
from . import divisor as _divisor
from . import gemm
from .gemm_plan import ALGOS


def linear_relu_div(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, divisor,
                    *, algo: str = "auto") -> torch.Tensor:
    """``relu(x @ weight.T + bias) / divisor`` with bias, ReLU and divide fused in the epilogue.

    Args:
        x: (M, K) CUDA tensor, float32 / float16 / bfloat16 / float64, any strides.
        weight: (N, K) tensor laid out as ``nn.Linear.weight`` (any strides), same dtype and
            device.
        bias: (N,) tensor or None.
        divisor: a real number or a one-element CPU tensor (0, inf, NaN give what torch gives).
        algo: ``"auto"`` (default), ``"wgmma"``, ``"tc"``, ``"tf32x3"``, ``"fp16x3"``, ``"simt"``
            or ``"naive"``: as for ``matmul`` (fp16x3 scales the rows of ``x`` and of ``weight``) (``cupy_ops.gemm_plan(x, weight.T)`` says which kernel
            a call takes).
    Returns:
        A contiguous (M, N) tensor of ``x``'s dtype.
    Raises:
        TypeError: a tensor argument is not a tensor or has a wrong dtype; divisor not a number.
        ValueError: wrong rank or shape, K mismatch, not on CUDA, devices differ, divisor with
            several elements or on the GPU, ``algo`` unknown or not fitting the dtype, size or GPU.
    """
    device = checks.linear_args(x, weight, bias, algo, ALGOS)
    checks.divisor(divisor, device, cuda_ok=False, context=" for linear_relu_div")
    scale, _ = _divisor.parse(divisor, x)
    M, N = x.shape[0], weight.shape[0]
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        if bias is not None and bias.stride(0) != 1:
            bias = bias.contiguous()
        b = weight.t()
        gemm.run(gemm.plan_for(x, b, "EpiBiasReluScale", algo), x, b, y, bias, scale)
    return y
