"""Compile layer: CUDA C source -> NVRTC -> a checked binary per variant.

The bottom of the package: it imports nothing of cupy_ops above it. The layers above
declare their sources and variants in its registry (``builtin``, ``user``); the launch
layer asks for a variant's ``binary`` when it is first launched on a device; the offline
check (``python -m cupy_ops compile``) compiles every registered variant without a GPU.
"""
from .build import Binary, binary, drop, forget
from .nvrtc import KernelCompileError, arch_for, import_cupy
from .offline import OfflineResult, compile_offline
from .registry import BASE_OPTIONS, Source, Variant, builtin, release, sources, user
from .source import assemble, assemble_text, source_dir

__all__ = ["Binary", "binary", "drop", "forget", "KernelCompileError", "arch_for", "import_cupy", "OfflineResult",
           "compile_offline", "BASE_OPTIONS", "Source", "Variant", "builtin", "release", "sources", "user", "assemble",
           "assemble_text", "source_dir"]
