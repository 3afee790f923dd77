"""cupy_ops: custom CUDA kernels for PyTorch with no C++ toolchain.

Kernels are CUDA C (``cuda_src/``) compiled at run time by NVRTC through CuPy, launched
zero-copy on torch tensors on torch's current stream. Importing this package compiles
nothing and does not import CuPy; the first launch of a kernel variant compiles it.

Ops (CUDA tensors, float32 / float16 / bfloat16, plus float64), differentiable in both modes,
vmap-able and torch.compile-able (as the ``torch.ops.cupy_ops.*`` ops):
    relu(x), relu_(x), relu_div(x, divisor), relu_div_(x, divisor),
    matmul(a, b), linear_relu(x, weight, bias), linear_relu_div(x, weight, bias, divisor),
    linear(x, weight, bias, epilogue=e, reduce=None, **params) with your epilogue
    e = cupy_ops.epilogue(CUDA C), row_reduce(x, how) (sum, mean, amax, amin, logsumexp, softmax)
Which GEMM kernel a call takes: ``cupy_ops.gemm_plan(a, b)``.
Your own kernels: ``cupy_ops.Kernel(source, name)``, tuned: ``cupy_ops.autotune``; your own torch
ops: ``cupy_ops.op``; the kernels of a ``load_inline`` source as written:
``cupy_ops.load_inline_kernels``.
Models (KernelBench problem/solution pairs): ``cupy_ops.models.relu``,
``cupy_ops.models.linear_relu_div``, ``cupy_ops.models.matmul``.
"""

import torch as _torch

if tuple(int(p) for p in _torch.__version__.split(".")[:2]) < (2, 4):
    raise ImportError(
        f"cupy_ops needs torch >= 2.4 (the op registration it uses), found torch {_torch.__version__}; upgrade torch"
    )

from .autotuning import Autotuned, Config, autotune, configs
from .compiler import KernelCompileError
from .kernel import Kernel, load_inline_kernels
from .launch import cdiv
from .op import Op, like, op
from .ops import (
    epilogue,
    gemm_plan,
    linear,
    linear_relu,
    linear_relu_div,
    matmul,
    relu,
    relu_,
    relu_div,
    relu_div_,
    row_reduce,
)
from .ops.gemm.epilogues import Epilogue
from .ops.gemm.packed import prepack, prepacked_bytes, unprepack

__version__ = "0.1.0"
__all__ = [
    "Autotuned",
    "Config",
    "Epilogue",
    "Kernel",
    "KernelCompileError",
    "Op",
    "autotune",
    "cdiv",
    "configs",
    "epilogue",
    "gemm_plan",
    "like",
    "linear",
    "linear_relu",
    "linear_relu_div",
    "load_inline_kernels",
    "matmul",
    "op",
    "prepack",
    "prepacked_bytes",
    "relu",
    "relu_",
    "relu_div",
    "relu_div_",
    "row_reduce",
    "unprepack",
]
