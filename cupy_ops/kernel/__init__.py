"""``cupy_ops.Kernel``: your own CUDA C kernel, compiled by NVRTC and launched on torch tensors
with the machinery the built-in ops use.

- ``types``: the C types a parameter may have, and template arguments bound to parameters;
- ``arguments``: a launch's arguments checked (and other libraries' arrays, streams);
- ``sources``: a user source kept while a ``Kernel`` uses it;
- ``kernel``: the ``Kernel`` class.
"""
from .kernel import Kernel, Occupancy
from .types import kernel_names, parse_signature

__all__ = ["Kernel", "Occupancy", "kernel_names", "parse_signature"]
