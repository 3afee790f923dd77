"""NVRTC, through CuPy's binding: one program, one compile, the image and its lowered names.

Works without a GPU (no driver call is made), which is how CI compiles every variant.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass, field

from . import headers


class KernelCompileError(RuntimeError):
    """NVRTC rejected a kernel source. ``source`` names it, ``log`` is NVRTC's log."""

    def __init__(self, source: str, log: str, options: tuple[str, ...] = ()):
        self.source = source
        self.log = log
        self.options = tuple(options)
        super().__init__(f"NVRTC failed to compile {source} (options {' '.join(options)}):\n{log}")


_EXTRAS = (
    "cupy_ops needs CuPy to compile and launch kernels: install the extra for your CUDA driver, "
    'pip install "cupy_ops[cuda13]" (CUDA 13) or "cupy_ops[cuda12]" (CUDA 12)'
)
_checked_versions = False


def import_cupy():
    """Import CuPy (after torch, so both use the CUDA libraries torch loaded).

    CuPy creates its cache folder (``CUPY_CACHE_DIR``) when imported and fails if it cannot:
    then warn, point ``CUPY_CACHE_DIR`` at a fresh private folder for this process and import
    again. Raises ``ImportError`` naming the extra to install when CuPy is not installed. The
    first import warns when CuPy's CUDA major version is not torch's (``cuda_mismatch``).
    """
    global _checked_versions
    import torch  # noqa: F401

    try:
        import cupy
    except ImportError as exc:
        raise ImportError(f"{_EXTRAS} ({exc})") from exc
    except OSError as exc:
        cupy = _import_with_private_cache(exc)
    if not _checked_versions:
        _checked_versions = True
        problem = cuda_mismatch()
        if problem:
            warnings.warn(f"cupy_ops: {problem}", RuntimeWarning, stacklevel=3)
    return cupy


def _cupy_cuda_major() -> int | None:
    """The CUDA major version the installed CuPy is built for (12 for cupy-cuda12x), from its
    package metadata: no driver call, no GPU needed."""
    from importlib import metadata

    for major in (11, 12, 13, 14):
        try:
            metadata.version(f"cupy-cuda{major}x")
            return major
        except metadata.PackageNotFoundError:
            continue
    return None


def cuda_mismatch() -> str | None:
    """A sentence when torch and CuPy are built for different CUDA major versions (e.g. the
    cuda12 extra beside a CUDA 13 torch, which a CUDA 12 driver cannot run), else None."""
    import torch

    if not torch.version.cuda:
        return None
    torch_major = int(torch.version.cuda.split(".")[0])
    cupy_major = _cupy_cuda_major()
    if cupy_major is None or cupy_major == torch_major:
        return None
    return (
        f"torch is built for CUDA {torch.version.cuda} but CuPy for CUDA {cupy_major} "
        f"(cupy-cuda{cupy_major}x): install the cuda{torch_major} extra instead of cuda{cupy_major}, or a "
        f"torch built for CUDA {cupy_major}; they must match your driver"
    )


def _import_with_private_cache(exc: OSError):
    """CuPy failed to create its cache folder: import it again with a private one."""
    fallback = tempfile.mkdtemp(prefix="cupy_ops_cupy_cache_")
    atexit.register(shutil.rmtree, fallback, True)  # private to this process: nothing to keep
    requested = os.environ.get("CUPY_CACHE_DIR", "~/.cupy/kernel_cache")
    warnings.warn(
        f"cupy_ops: the CuPy kernel cache {requested!r} is not usable ({exc}); using {fallback} "
        "for this process instead",
        RuntimeWarning,
        stacklevel=4,
    )
    os.environ["CUPY_CACHE_DIR"] = fallback
    for name in [m for m in sys.modules if m == "cupy" or m.startswith("cupy.")]:
        del sys.modules[name]
    import cupy

    return cupy


def binding():
    """CuPy's NVRTC binding, loaded as the run-time path loads it (torch, then CuPy first:
    importing only the binding can bind another libnvrtc on machines that carry several)."""
    import_cupy()
    from cupy_backends.cuda.libs import nvrtc

    return nvrtc


_version: tuple[int, int] | None = None


def version() -> tuple[int, int]:
    """NVRTC's (major, minor) version."""
    global _version
    if _version is None:
        _version = tuple(binding().getVersion())
    return _version


def arch_for(major: int, minor: int) -> str:
    """The ``-arch`` value for a device of compute capability ``major.minor``: its own
    ``sm_XY`` (a cubin) when this NVRTC knows it, else PTX for the newest architecture it
    knows (``compute_XY``), which the driver compiles for the device."""
    cc = major * 10 + minor
    supported = tuple(binding().getSupportedArchs())
    if cc in supported:
        return f"sm_{cc}"
    older = [a for a in supported if a <= cc]
    if not older:
        raise RuntimeError(
            f"NVRTC {'.'.join(map(str, version()))} cannot build for compute capability "
            f"{major}.{minor} (it knows {', '.join(map(str, supported))})"
        )
    return f"compute_{max(older)}"


@functools.cache
def supports(arch: str) -> bool:
    """Whether this NVRTC builds for ``arch`` (``"sm_90a"``, ``"sm_100f"``): asked of NVRTC
    with an empty program (its list of architectures names no ``a`` / ``f`` target)."""
    return compile("", "target.cu", (), (f"-arch={arch}",)).ok


def unsupported(arch: str) -> str:
    """The sentence for a target this NVRTC cannot build."""
    known = ", ".join(f"sm_{a}" for a in binding().getSupportedArchs())
    return (
        f"NVRTC {'.'.join(map(str, version()))} cannot build for {arch}: it knows {known} (and, of those, "
        f"arch-specific 'a' and family 'f' targets it was released with); a newer NVRTC (the "
        f"nvidia-cuda-nvrtc wheel of a newer CUDA) may"
    )


@dataclass
class Result:
    """One NVRTC compile: its log, the image (None when the compile failed: see ``log``), and
    each name expression's lowered (mangled) name in it."""

    log: str
    image: bytes | None
    lowered: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.image is not None


_BAD_ARCH = ("invalid value for --gpu-architecture", "invalid or no value specified with --nv_arch")
# an operator or conversion CUDA's 16-bit types lack under torch's -D__CUDA_NO_HALF_OPERATORS__ ...
_NO_OPERATOR = re.compile(
    r'(no operator "[^"]+" matches these operands|no suitable (constructor|conversion function) exists to convert)'
    r"[^\n]*(\n[^\n]*){0,2}(__half|__nv_bfloat16|half|bf16)"
)
_NOT_ON_TARGET = re.compile(r"Instruction '([^']+)' not supported on \.target 'sm_(\d+)'")


def explain(log: str, options) -> str:
    """NVRTC's ``log`` with cupy_ops' notes after it: a target this NVRTC cannot build, an
    instruction that needs the arch-specific target (``sm_90a`` for wgmma), a header that is
    not installed (the extra to install)."""
    notes = []
    arch = next((o.split("=", 1)[1] for o in options if o.startswith("-arch=")), None)
    if arch and any(b in log for b in _BAD_ARCH):
        notes.append(f"cupy_ops: {unsupported(arch)}")
    for instr, cc in dict.fromkeys(_NOT_ON_TARGET.findall(log)):
        if arch and arch.endswith(f"_{cc}") and supports(f"sm_{cc}a"):
            notes.append(
                f"cupy_ops: {instr} needs the arch-specific target sm_{cc}a, whose code runs on compute "
                f'capability {cc[:-1]}.{cc[-1]} only: Kernel(..., arch="sm_{cc}a"), or python -m '
                f"cupy_ops compile --arch sm_{cc}a"
            )
    if "open source file" in log:
        notes.append(headers.hint(log, version()))
    off = [
        o[2:]
        for o in options
        if o.startswith("-D__CUDA_NO_") and o[2:] not in {u[2:] for u in options if u[:2] == "-U"}
    ]
    if off and _NO_OPERATOR.search(log):
        notes.append(
            f"cupy_ops: compiled with {' '.join('-D' + o for o in off)} (torch's flags for an extension, as "
            f"load_inline passes them): no operators or conversions of __half and __nv_bfloat16 but a source's own; "
            f"options=['-U{off[0]}', ...] undoes one"
        )
    notes = [n for n in notes if n]
    return log.rstrip("\0").rstrip("\n") + "\n" + "\n".join(notes) if notes else log


def compile(text: str, name: str, exprs, options) -> Result:
    """Compile ``text`` (called ``name`` in the log) with ``options`` for the instantiations
    ``exprs``. A ``-arch=compute_XX`` option gives PTX, ``-arch=sm_XX`` a cubin. A failed
    compile's log carries cupy_ops' notes (``explain``)."""
    nvrtc = binding()
    exprs = list(exprs)
    ptx = any(o.startswith("-arch=compute_") for o in options)
    prog = nvrtc.createProgram(text, name, [], [])
    try:
        for e in exprs:
            nvrtc.addNameExpression(prog, e)
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            return Result(explain(nvrtc.getProgramLog(prog), options), None)
        image = nvrtc.getPTX(prog) if ptx else nvrtc.getCUBIN(prog)
        if isinstance(image, str):
            image = image.encode()
        return Result(nvrtc.getProgramLog(prog), bytes(image), {e: nvrtc.getLoweredName(prog, e) for e in exprs})
    finally:
        nvrtc.destroyProgram(prog)
