"""KernelBench level1/1: square matrix multiplication, N = 4096."""
from typing import Optional

import torch
import torch.nn as nn

import cupy_ops
from cupy_ops.ops.gemm import tf32x3_runs
from cupy_ops.ops.gemm_plan import fp16x3_or_tf32x3

N = 2048 * 2


class Model(nn.Module):
    """Reference: ``torch.matmul(A, B)``."""

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


class ModelNew(nn.Module):
    """Drop-in for ``Model``: ``cupy_ops.matmul``. By default the fastest kernel that passes
    KernelBench's check (allclose at 1e-4) with an error against fp64 no larger than torch
    fp32's: for float32 on Hopper (compute capability 9.0) ``algo="fp16x3"`` (three fp16
    products of row-scaled pieces on the tensor cores: H100, 4096^3, about 3.3-3.6x torch fp32 at
    about 0.3x its error; see ``cupy_ops.matmul`` for its contract), or ``algo="tf32x3"``
    (three TF32 products) below 2^33 multiply-adds, where it is the faster; else
    ``algo="auto"``. ``ModelNew("naive")`` (or any other ``algo``) runs that kernel."""

    def __init__(self, algo: Optional[str] = None):
        super().__init__()
        self.algo = algo

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        algo = self.algo or (fp16x3_or_tf32x3(A.shape[0], B.shape[1], A.shape[1])
                             if tf32x3_runs(A) and B.dtype == torch.float32 and A.dim() == B.dim() == 2 else "auto")
        return cupy_ops.matmul(A, B, algo=algo)


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
