"""KernelBench level2/63: Linear(8192 -> 8192) -> ReLU -> divide by 2.0, batch 1024.

Two solutions, as in the load_inline seeds this project replaces:
``ModelNew`` keeps the GEMM in cuBLAS (``nn.Linear``) and fuses ReLU and the divide into one
cupy_ops kernel; ``ModelNewNaive`` runs the whole layer in the naive fused GEMM kernel.
Both hold their weights in an ``nn.Linear`` named ``linear``, created first, exactly as
``Model`` does: the same seed gives the same weights, and ``state_dict``s are interchangeable.
"""
import torch
import torch.nn as nn

import cupy_ops

batch_size = 1024
in_features = 8192
out_features = 8192
divisor = 2.0


class Model(nn.Module):
    """Reference: ``torch.relu(self.linear(x)) / divisor``."""

    def __init__(self, in_features: int, out_features: int, divisor: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        x = torch.relu(x)
        return x / self.divisor


class ModelNew(Model):
    """cuBLAS GEMM (``nn.Linear``) followed by the fused ``cupy_ops.relu_div`` kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cupy_ops.relu_div(self.linear(x), self.divisor)


class ModelNewNaive(Model):
    """The whole layer in one naive fused kernel: ``cupy_ops.linear_relu_div``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cupy_ops.linear_relu_div(x, self.linear.weight, self.linear.bias, self.divisor, algo="naive")


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
