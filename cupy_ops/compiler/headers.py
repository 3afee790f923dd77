"""CUDA's headers for a user's kernel, found with no CUDA toolkit and no ``CUDA_PATH``.

NVRTC reads a header only from a folder on its ``-I`` list: it carries none of CUDA's headers and
none of the C or C++ library's. A user's kernel is compiled with these folders, for the CUDA
major version of the NVRTC that compiles it (``cuda12`` / ``cuda13`` extras install them):

- the CUDA runtime headers (``cuda_runtime.h``, ``cuda_fp16.h``, ``cooperative_groups.h``,
  ``mma.h``, ...): ``nvidia-cuda-runtime`` (CUDA 13: ``nvidia/cu13/include``) or
  ``nvidia-cuda-runtime-cu12`` (``nvidia/cuda_runtime/include``);
- the CRT headers those include (``crt/mma.h``, ...): ``nvidia-cuda-crt`` (the same folder) or
  ``nvidia-cuda-nvcc-cu12`` (``nvidia/cuda_nvcc/include``);
- CCCL (libcu++'s ``<cuda/std/...>``, ``<cuda/barrier>``, CUB, Thrust): ``nvidia-cuda-cccl`` or
  ``nvidia-cuda-cccl-cu12``, else the copy CuPy ships (``cupy/_core/include/cupy/_cccl``);
- cupy_ops' own few C headers (``include/`` beside this file: ``stdint.h`` and ``stdlib.h``,
  which ``cuda.h`` includes, and ``math.h``), searched last.

Each folder is found through its distribution's metadata (where pip put it, and its version),
as CuPy and cuda.pathfinder look in site-packages. A folder is fingerprinted by its
distributions' versions, not by hashing its thousands of files; the fingerprint enters the
cache key of every user kernel. This module imports nothing of NVRTC: callers pass NVRTC's
version.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

SHIMS = Path(__file__).resolve().parent / "include"


@dataclass(frozen=True)
class Root:
    """One folder of headers: ``path`` (given to NVRTC as ``-I``), ``what`` it holds, the
    ``distribution`` that installed it and its ``version`` (None and cupy_ops' version for the
    package's own), and ``note``: why it may not suit this NVRTC (empty when it does)."""

    path: Path
    what: str
    distribution: str | None
    version: str
    note: str = ""


def wheels(major: int) -> tuple:
    """``[(what, distribution, folder in site-packages, a file that proves the folder whole,
    whether its version follows CUDA's minor)]`` for CUDA ``major``."""
    if major >= 13:
        inc = f"nvidia/cu{major}/include"
        return (
            ("CUDA runtime headers", "nvidia-cuda-runtime", inc, "cuda_runtime.h", True),
            ("CRT headers", "nvidia-cuda-crt", inc, "crt/host_defines.h", True),
            ("CCCL", "nvidia-cuda-cccl", inc + "/cccl", "cuda/std/version", False),
        )
    return (
        (
            "CUDA runtime headers",
            f"nvidia-cuda-runtime-cu{major}",
            "nvidia/cuda_runtime/include",
            "cuda_runtime.h",
            True,
        ),
        ("CRT headers", f"nvidia-cuda-nvcc-cu{major}", "nvidia/cuda_nvcc/include", "crt/host_defines.h", True),
        # the 12.1 wheel lacks every header without a suffix (cuda/std/...): not whole
        ("CCCL", f"nvidia-cuda-cccl-cu{major}", "nvidia/cuda_cccl/include", "cuda/std/version", False),
    )


def extra(major: int) -> str:
    """The pip line that installs the headers for CUDA ``major``."""
    return f'pip install "cupy_ops[cuda{major}]"'


def _minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


@functools.cache
def roots(nvrtc_version: tuple[int, int]) -> tuple[Root, ...]:
    """The header folders for an NVRTC of ``nvrtc_version`` (major, minor), in search order,
    cupy_ops' own last. A runtime or CRT wheel of a newer minor than NVRTC is used, with a
    ``note`` (its headers may call what this NVRTC lacks)."""
    major = nvrtc_version[0]
    found: list[Root] = []
    cccl = False
    for what, dist, rel, marker, follows_cuda in wheels(major):
        try:
            d = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        folder = Path(d.locate_file(rel)).resolve()
        if not (folder / marker).is_file():
            continue
        note = ""
        v = _minor(d.version)
        if follows_cuda and v is not None and v > tuple(nvrtc_version):
            note = (
                f"newer than NVRTC {nvrtc_version[0]}.{nvrtc_version[1]}; if a kernel fails in its headers: "
                f'pip install "{dist}=={nvrtc_version[0]}.{nvrtc_version[1]}.*"'
            )
        found.append(Root(folder, what, dist, d.version, note))
        cccl = cccl or what == "CCCL"
    if not cccl:
        found += _cupy_cccl(major)
    return tuple(found) + (Root(SHIMS, "cupy_ops' C headers (stdint.h, stdlib.h, math.h)", None, _shims_digest()),)


def _cupy_cccl(major: int) -> list[Root]:
    """CCCL as CuPy ships it (libcu++, CUB, Thrust: three folders), or nothing."""
    for dist in [f"cupy-cuda{major}x"] + [f"cupy-cuda{m}x" for m in (11, 12, 13, 14) if m != major]:
        try:
            d = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            continue
        base = Path(d.locate_file("cupy/_core/include/cupy/_cccl")).resolve()
        folders = [base / "libcudacxx", base / "cub", base / "thrust"]
        if not (folders[0] / "cuda/std/version").is_file():
            continue
        version = f"{d.version} (CCCL {_cccl_version(folders[0])})"
        return [Root(f, "CCCL (CuPy's copy)", dist, version) for f in folders if f.is_dir()]
    return []


def _cccl_version(libcudacxx: Path) -> str:
    try:
        text = (libcudacxx / "cuda/std/__cccl/version.h").read_text(encoding="utf-8")
    except OSError:
        return "?"
    m = re.search(r"#\s*define\s+CCCL_VERSION\s+(\d+)", text)
    if not m:
        return "?"
    n = int(m.group(1))
    return f"{n // 1000000}.{n // 1000 % 1000}.{n % 1000}"


def _shims_digest() -> str:
    h = hashlib.sha256()
    for f in sorted(SHIMS.glob("*.h")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def include_dirs(nvrtc_version: tuple[int, int]) -> tuple[Path, ...]:
    """The folders of ``roots`` in search order, each once."""
    return tuple(dict.fromkeys(r.path for r in roots(nvrtc_version)))


def fingerprint(nvrtc_version: tuple[int, int]) -> str:
    """What the cache key of a user kernel holds of the header folders: each folder with the
    distribution and version that put it there (an upgraded wheel recompiles)."""
    return "\n".join(f"{r.path}\0{r.distribution}\0{r.version}" for r in roots(nvrtc_version))


def resolve(name: str, nvrtc_version: tuple[int, int]) -> Path | None:
    """The file an ``#include <name>`` finds in the header folders, or None."""
    for folder in include_dirs(nvrtc_version):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def missing(nvrtc_version: tuple[int, int]) -> list[str]:
    """What of CUDA's headers no wheel provides (runtime, CRT, CCCL), for ``info`` and errors."""
    have = {r.what.split(" (")[0] for r in roots(nvrtc_version)}
    return [what for what, *_ in wheels(nvrtc_version[0]) if what not in have]


def describe(nvrtc_version: tuple[int, int]) -> list[str]:
    """One line per header folder (what, version, where, and a note), then what is missing
    with the pip line that installs it: what ``python -m cupy_ops info`` prints."""
    lines = [
        f"{r.what}: {r.distribution + ' ' if r.distribution else ''}{r.version} at {r.path}"
        + (f" ({r.note})" if r.note else "")
        for r in roots(nvrtc_version)
    ]
    gone = missing(nvrtc_version)
    if gone:
        lines.append(f"missing: {', '.join(gone)} for CUDA {nvrtc_version[0]}: {extra(nvrtc_version[0])}")
    return lines


# What NVRTC cannot open and CUDA's wheels provide (the rest: C and C++ library headers)
_CUDA_HEADER = re.compile(
    r"(cuda[A-Za-z0-9_]*\.hp?p?|cuda/.*|cub/.*|thrust/.*|nv/.*|crt/.*|cooperative_groups.*"
    r"|mma\.h|math_constants\.h|vector_(types|functions)\.h|builtin_types\.h|driver_types\.h"
    r"|device_[a-z_]+\.h|sm_\d+_[a-z_]+\.h|texture_[a-z_]+\.h|surface_[a-z_]+\.h)"
)
# Header folders of torch's C++ side and pybind11: what only an extension's host code uses
TORCH_HEADERS = frozenset(["torch", "ATen", "c10", "c10d", "caffe2", "THC", "THH", "pybind11"])
# C headers NVRTC lacks, and what device code uses of them instead
_C_HINTS = {
    "assert.h": "assert() is built into NVRTC's device code; drop the include",
    "stdio.h": "printf is built into NVRTC's device code; drop the include",
    "float.h": "libcu++'s <cuda/std/cfloat>",
    "limits.h": "libcu++'s <cuda/std/climits>",
}
_NOT_OPENED = re.compile(r'(?:cannot|could not) open source file "([^"]+)"')


def hint(log: str, nvrtc_version: tuple[int, int]) -> str:
    """A note for NVRTC's ``log`` when it could not open a header: a CUDA header names the
    extra that installs it; a C++ library header, libcu++'s counterpart. Empty otherwise."""
    notes = []
    for name in dict.fromkeys(_NOT_OPENED.findall(log)):
        if _CUDA_HEADER.fullmatch(name):
            gone = missing(nvrtc_version)
            if gone:
                notes.append(
                    f"cupy_ops: <{name}> is one of CUDA's headers; {', '.join(gone)} for CUDA "
                    f"{nvrtc_version[0]} not installed: {extra(nvrtc_version[0])}"
                )
            else:
                where = ", ".join(str(d) for d in include_dirs(nvrtc_version))
                notes.append(f"cupy_ops: <{name}> is in none of the CUDA header folders ({where})")
        elif name.split("/")[0] in TORCH_HEADERS or name == "Python.h":
            notes.append(
                f"cupy_ops: <{name}> is torch's, for an extension's host code: "
                f"cupy_ops.load_inline_kernels(source) sets the host side aside and compiles its kernels"
            )
        elif name in _C_HINTS:
            notes.append(f"cupy_ops: NVRTC has no C library <{name}>: {_C_HINTS[name]}")
        elif "/" not in name and "." not in name:
            ours = resolve(f"cuda/std/{name}", nvrtc_version)
            notes.append(
                f"cupy_ops: NVRTC has no C++ standard library <{name}>"
                + (f"; libcu++ has it: #include <cuda/std/{name}> and use cuda::std::" if ours else "")
            )
    return "\n".join(notes)
