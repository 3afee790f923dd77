"""``cupy_ops.Kernel``: your own CUDA C kernel, compiled by NVRTC and launched on torch tensors
with the machinery the built-in ops use.

- ``types``: the C types a parameter may have, and template arguments bound to parameters;
- ``arguments``: each launch argument checked (and other libraries' arrays, streams); ``packing``:
  all of a launch's arguments checked against the parameters, into slot values;
- ``sources``: a user source kept while a ``Kernel`` uses it;
- ``kernel``: the ``Kernel`` class;
- ``load_inline``: the kernels of a ``torch.utils.cpp_extension.load_inline`` source, as written.
"""

from .kernel import Kernel, Occupancy
from .load_inline import InlineKernels, SetAside, load_inline_kernels
from .types import kernel_names, parse_signature

__all__ = ["InlineKernels", "Kernel", "Occupancy", "SetAside", "kernel_names", "load_inline_kernels", "parse_signature"]
