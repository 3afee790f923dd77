"""Ops layer: one launcher per op (validate with ``checks``, allocate with torch, launch).

These are the eager implementations; ``cupy_ops`` (api.py) routes to them directly, or through
the torch custom ops (torch_ops.py) when autograd or torch.compile needs it. Importing this
package declares every built-in kernel variant in the compile layer's registry.
"""
from .linear_relu_div import linear_relu_div
from .matmul import matmul
from .relu import relu, relu_
from .relu_backward import relu_backward
from .relu_div import relu_div, relu_div_

__all__ = ["relu", "relu_", "relu_div", "relu_div_", "matmul", "linear_relu_div", "relu_backward"]
