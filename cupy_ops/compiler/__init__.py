"""Compile layer: CUDA C source -> NVRTC -> a checked binary per variant.

The bottom of the package: it imports nothing of cupy_ops above it. The layers above
declare their sources and variants in its registry (``builtin``, ``user``); the launch
layer asks for a variant's ``binary`` when it is first launched on a device; the offline
check (``python -m cupy_ops compile``) compiles every registered variant without a GPU;
``declarations`` reads kernels' declarations from CUDA C, ``options`` checks a user's NVRTC
options, ``export`` gives a kernel's PTX or cubin. ``headers`` finds CUDA's headers for a
user's kernel (the wheels of the cuda12 / cuda13 extra), ``targets`` says what runs where.
"""

from . import declarations, headers, targets
from .build import Binary, binary, drop, forget
from .nvrtc import KernelCompileError, arch_for, import_cupy
from .offline import Export, OfflineResult, compile_offline, export
from .options import check as check_options
from .options import defines as check_defines
from .registry import BASE_OPTIONS, USER_OPTIONS, Source, Variant, assemble_user, builtin, release, sources, user
from .source import assemble, assemble_text, source_dir

__all__ = [
    "BASE_OPTIONS",
    "USER_OPTIONS",
    "Binary",
    "Export",
    "KernelCompileError",
    "OfflineResult",
    "Source",
    "Variant",
    "arch_for",
    "assemble",
    "assemble_text",
    "assemble_user",
    "binary",
    "builtin",
    "check_defines",
    "check_options",
    "compile_offline",
    "declarations",
    "drop",
    "export",
    "forget",
    "headers",
    "import_cupy",
    "release",
    "source_dir",
    "sources",
    "targets",
    "user",
]
