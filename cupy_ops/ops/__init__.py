"""The built-in ops, one module each holding its whole declaration on the op layer (cupy_ops/op.py):
kernel, launcher, output rule, backward, forward-AD and vmap rules, autocast policy, in-place
form. Importing this package declares every built-in kernel variant in the compile layer's
registry and every op as ``torch.ops.cupy_ops.*``."""

from .gemm import gemm_plan
from .linear import epilogue, linear
from .linear_relu_div import linear_relu, linear_relu_div
from .matmul import matmul
from .relu import relu, relu_
from .relu_backward import relu_backward
from .relu_div import relu_div, relu_div_
from .row_reduce import row_reduce

__all__ = [
    "epilogue",
    "gemm_plan",
    "linear",
    "linear_relu",
    "linear_relu_div",
    "matmul",
    "relu",
    "relu_",
    "relu_backward",
    "relu_div",
    "relu_div_",
    "row_reduce",
]
