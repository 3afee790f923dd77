"""Ops layer: one launcher per op (validate, allocate with torch, launch, return)."""
from .linear_relu_div import linear_relu_div
from .matmul import matmul
from .relu import relu, relu_
from .relu_div import relu_div, relu_div_

__all__ = ["relu", "relu_", "relu_div", "relu_div_", "matmul", "linear_relu_div"]
