"""KernelBench level1/19: ReLU on a (4096, 393216) tensor."""

import torch
import torch.nn as nn

import cupy_ops

batch_size = 4096
dim = 393216


class Model(nn.Module):
    """Reference: ``torch.relu(x)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class ModelNew(nn.Module):
    """Drop-in for ``Model``: ``cupy_ops.relu`` (16-byte vectorised, exact)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cupy_ops.relu(x)


def get_inputs():
    """KernelBench's inputs: one CPU tensor of ``torch.rand`` (all >= 0; test randn too)."""
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
