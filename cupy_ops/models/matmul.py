"""KernelBench level1/1: square matrix multiplication, N = 4096."""
import torch
import torch.nn as nn

import cupy_ops

N = 2048 * 2


class Model(nn.Module):
    """Reference: ``torch.matmul(A, B)``."""

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


class ModelNew(nn.Module):
    """Drop-in for ``Model``: ``cupy_ops.matmul`` (``algo="auto"``: the fastest correct kernel;
    ``ModelNew("naive")`` runs the reference kernel)."""

    def __init__(self, algo: str = "auto"):
        super().__init__()
        self.algo = algo

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cupy_ops.matmul(A, B, algo=self.algo)


def get_inputs():
    return [torch.rand(N, N), torch.rand(N, N)]


def get_init_inputs():
    return []
