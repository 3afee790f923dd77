"""KernelBench level1/1: square matrix multiplication, N = 4096."""

from typing import Optional

import torch
import torch.nn as nn

import cupy_ops

N = 2048 * 2


class Model(nn.Module):
    """Reference: ``torch.matmul(A, B)``."""

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


class ModelNew(nn.Module):
    """Drop-in for ``Model``: ``cupy_ops.matmul(A, B, algo="accurate")``, the fastest kernel
    that passes KernelBench's check (allclose at 1e-4) with an error against fp64 no larger
    than torch fp32's: for float32 on Hopper (compute capability 9.0) ``"fp16x3"`` (three fp16
    products of row-scaled pieces on the tensor cores: about 3.5-3.7x torch fp32 at 4096^3 on
    an H100, at about 0.3x its error; see ``cupy_ops.matmul`` for its contract), or ``"tf32x3"``
    (three TF32 products) where a cost model of the two says it is the faster; else what
    ``"auto"`` takes. ``ModelNew("naive")`` (or any other ``algo``) runs that kernel."""

    def __init__(self, algo: Optional[str] = None):
        super().__init__()
        self.algo = algo

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cupy_ops.matmul(A, B, algo=self.algo or "accurate")


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
