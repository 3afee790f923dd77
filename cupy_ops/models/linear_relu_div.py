"""KernelBench level2/63: Linear(8192 -> 8192) -> ReLU -> divide by 2.0, batch 1024.

``ModelNew`` runs the fastest variant that passes KernelBench's check with at most torch fp32's
error: on Hopper the whole layer in one fused kernel (float32: fp16x3, or 3xTF32 for small layers;
float16 / bfloat16: the wgmma kernel); elsewhere ``ModelNewCublas``: cuBLAS (``nn.Linear``) followed
by one fused ReLU-and-divide kernel. ``ModelNewNaive`` runs the whole layer in the naive fused GEMM
kernel. Both hold their weights in an ``nn.Linear`` named ``linear``, created first, exactly as
``Model`` does: the same seed gives the same weights, and ``state_dict``s are interchangeable."""

import torch
import torch.nn as nn

import cupy_ops
from cupy_ops.device import capability

batch_size = 1024
in_features = 8192
out_features = 8192
divisor = 2.0
_TENSOR_CORE = (torch.float32, torch.float16, torch.bfloat16)


def _hopper(x: torch.Tensor) -> bool:
    """CUDA tensor ``x``'s device has compute capability 9.0 (cached: the query costs more than
    the rest of a small forward, and ``x.device`` builds an object where ``get_device()`` reads an
    int; torch.compile folds the query itself to a constant)."""
    if torch.compiler.is_compiling():
        return torch.cuda.get_device_capability(x.device) == (9, 0)
    return capability(x.get_device()) == (9, 0)


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
    """The fastest variant that passes KernelBench's check (allclose at 1e-4 against ``Model``)
    with an error against fp64 no larger than torch fp32's:

    - float32 on Hopper (compute capability 9.0): the whole layer in one kernel,
      ``cupy_ops.linear_relu_div(..., algo="accurate")``, which takes ``"fp16x3"``: the GEMM as three fp16 products of
      row-scaled pieces of x and of the weight on the tensor cores, with bias, ReLU and divide
      in its epilogue (H100, 1024 x 8192 x 8192: about 3.3-3.6x torch fp32, error about 0.2-0.3x
      torch fp32's; README's benchmark tables; a value more than 2^17 below the largest of its
      row of x or of the weight keeps less precision: see ``cupy_ops.matmul``); where a cost
      model of the two says so (few rows against a large weight, small products), ``algo="tf32x3"``
      (three TF32 products; ``cupy_ops.gemm_plan`` prints both estimates);
    - float16 / bfloat16 on Hopper: the whole layer in one kernel, ``cupy_ops.linear_relu_div``
      (``algo="accurate"`` takes what ``"auto"`` takes: the wgmma kernel with the epilogue fused;
      H100, 1024 x 8192 x 8192: 1.03x (fp16) / 1.04x (bf16) the speed of cuBLAS + ``relu_div``; the
      output rounded to the dtype before the ReLU, as torch's layer does);
    - otherwise (other GPUs, where cuBLAS's GEMM beats ours): ``ModelNewCublas``'s cuBLAS
      (``nn.Linear``) + fused ``cupy_ops.relu_div``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        if x.is_cuda and w.dtype == x.dtype and x.dtype in _TENSOR_CORE and _hopper(x):
            return cupy_ops.linear_relu_div(x, w, self.linear.bias, self.divisor, algo="accurate")
        return ModelNewCublas.forward(self, x)


class ModelNewCublas(Model):
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
