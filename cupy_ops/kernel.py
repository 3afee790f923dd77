"""``cupy_ops.Kernel``: your own CUDA C kernel, compiled by NVRTC and launched on torch tensors
with the same machinery as the built-in ops (which are built on it).

    scale = cupy_ops.Kernel('''
    template <class T>
    __global__ void scale(const T* x, T* y, float s, long long n) {
      long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = from_float<T>(to_float(x[i]) * s);
    }''', "scale")
    y = torch.empty_like(x)
    scale(x, y, 2.0, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)

The parameter list is read from the source, so each argument is checked and passed with the
right C type: tensors for pointers (CUDA, contiguous, on one device), Python numbers for
``float``/``double``/``int``/``long long``. A ``template <class T>`` kernel is instantiated
for float32 (``float``), float16 (``f16``), bfloat16 (``bf16``) and float64 (``double``), and
the first tensor argument picks ``T``. ``cuda_src/common.cuh`` is pasted in before your code:
it gives the ``f16``/``bf16`` element types and exact conversions, ``to_float(x[i])`` and
``from_float<T>(v)`` (fp64 stays fp64). The kernel runs on torch's current stream
of the tensors' device; compilation happens on first call and is cached (per process, per
device, and on disk in ``CUPY_CACHE_DIR``).
"""
from __future__ import annotations

import hashlib
import numbers
import os
import re
from pathlib import Path

import torch

from . import compiler, launch

_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|typename|struct|signed|__grid_constant__)\b")
_KINDS = {
    "float": "f32", "double": "f64",
    "int": "i32", "unsigned": "i32", "unsigned int": "i32", "int32_t": "i32", "uint32_t": "i32",
    "i32": "i32", "u32": "i32",
    "long long": "i64", "long long int": "i64", "unsigned long long": "i64", "long": "i64",
    "unsigned long": "i64", "int64_t": "i64", "uint64_t": "i64", "size_t": "i64", "ptrdiff_t": "i64",
    "i64": "i64", "u64": "i64",
    "TmaMap": "tmap",   # gemm_wgmma.cuh's 128-byte TMA tensor map, passed by value (built-in kernels)
}
_I32 = (-(2**31), 2**32 - 1)
BUILTINS: list["Kernel"] = []   # the built-in ops' kernels, parsed (and registered) on first use
_I64 = (-(2**63), 2**64 - 1)


def _split_params(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def parse_signature(code: str, name: str) -> tuple[str | None, list[tuple[str, str, str]]]:
    """Find ``__global__ void name(...)`` in ``code``: ``(template_param, [(kind, pname, ctype)])``.

    ``kind`` is one of ``ptr``, ``i32``, ``i64``, ``f32``, ``f64`` or ``acc`` (the compute
    type of the element type: f64 for double, else f32). Raises ``ValueError`` when the kernel
    is not found or a parameter has a type that cannot be passed from Python.
    """
    code = re.sub(r"/\*.*?\*/", " ", code, flags=re.S)   # comments may sit anywhere
    code = re.sub(r"//[^\n]*", " ", code)
    m = re.search(r"(template\s*<\s*(?:class|typename)\s+(\w+)\s*>\s*)?"
                  r"(?:extern\s+\"C\"\s+)?__global__\s+void\s+(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?"
                  + re.escape(name) + r"\s*\(", code)
    if m is None:
        raise ValueError(f"no `__global__ void {name}(...)` found in the kernel source")
    template = m.group(2)
    depth, i = 1, m.end()
    while depth and i < len(code):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    params = []
    for p in _split_params(code[m.end():i - 1]):
        if p in ("", "void"):
            continue
        p = p.split("=")[0].strip()
        pm = re.match(r"(.*?)(\w+)\s*(\[\s*\])?$", p, re.S)
        if pm is None:
            raise ValueError(f"cannot read parameter {p!r} of kernel {name}")
        ctype, pname = " ".join(pm.group(1).split()), pm.group(2)
        if "*" in ctype or pm.group(3):
            kind = "ptr"
        elif re.search(r"\bAcc\b", ctype):
            kind = "acc"
        else:
            base = " ".join(_QUALIFIERS.sub(" ", ctype).split())
            kind = _KINDS.get(base)
            if kind is None:
                raise ValueError(
                    f"parameter {pname!r} of kernel {name} has type {ctype!r}, which cannot be passed from "
                    f"Python; use pointers, float, double, int or long long (or pass signature=)"
                )
        params.append((kind, pname, ctype))
    return template, params


class Kernel:
    """A CUDA C kernel from a file or a string, launched on torch tensors.

    Args:
        source: CUDA C code (a string), or the path of a ``.cu`` file (a ``Path``, or a string
            ending in ``.cu``/``.cuh`` without newlines). Quoted includes are looked up next to
            the file, then in cupy_ops' ``cuda_src/``.
        name: the ``__global__`` function to launch.
        signature: optional list of parameter kinds (``"ptr"``, ``"i32"``, ``"i64"``,
            ``"f32"``, ``"f64"``, ``"acc"``) when the parameter list cannot be read.
    Raises:
        TypeError: ``source`` or ``name`` of a wrong type.
        ValueError: the kernel is not in the source, or a parameter type is not supported.
        FileNotFoundError: the source file does not exist.
    Compile errors surface on first call as ``cupy_ops.KernelCompileError`` (a RuntimeError)
    with NVRTC's log.
    """

    def __init__(self, source, name: str, *, signature=None, variants=None, _builtin: bool = False):
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"name must be the kernel's identifier (a str), got {name!r}")
        self.name = name
        directory = None
        if _builtin:
            self.key, code = str(source), None
        elif isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                                  and source.strip().endswith((".cu", ".cuh"))):
            path = Path(source).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"kernel source {path} not found")
            code, directory = path.read_text(), str(path.parent)
            self.key = f"{path.name}@{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
        elif isinstance(source, str):
            code = source
            self.key = f"<{name} source {hashlib.sha1(code.encode()).hexdigest()[:8]}>"
        else:
            raise TypeError(f"source must be CUDA code (str) or a path to a .cu file, got {type(source).__name__}")
        if code is not None and '#include "common.cuh"' not in code:
            code = '#include "common.cuh"\n' + code
        self._code, self._directory = code, directory
        self._signature = tuple(signature) if signature is not None else None
        self._variants = tuple(variants) if variants else None
        self._params = None
        self._template = None
        self._handles: dict = {}
        self._parsed = False
        self._arch = None
        if not _builtin:
            self._parse()

    @classmethod
    def builtin(cls, filename: str, name: str, variants=None, arch: str | None = None) -> "Kernel":
        """A kernel of cupy_ops' own ``cuda_src/`` (its file is read on first use, not at import).

        ``variants``: explicit template instantiations (e.g. ``"matmul_simt<true, false>"``)
        for kernels not templated on one element type; ``handle`` then takes one of them.
        ``arch``: the one architecture the file is built for (e.g. ``"sm_90a"`` for wgmma code);
        None builds for the device's own.
        """
        k = cls(filename, name, variants=variants, _builtin=True)
        k._arch = arch
        BUILTINS.append(k)
        return k

    def _parse(self) -> None:
        code = self._code if self._code is not None else (compiler.source_dir() / self.key).read_text()
        self._template, params = parse_signature(code, self.name)
        if self._signature is not None:
            if len(self._signature) != len(params):
                raise ValueError(f"signature has {len(self._signature)} entries but kernel {self.name} "
                                 f"takes {len(params)} parameters")
            params = [(k, p, c) for k, (_, p, c) in zip(self._signature, params)]
        self._params = params
        if self._variants:
            self.exprs = {v: v for v in self._variants}
        elif self._template:
            self.exprs = {dt: f"{self.name}<{c}>" for dt, c in launch.DTYPE_NAMES.items()}
        else:
            self.exprs = {None: self.name}
        compiler.register(self.key, self.exprs.values(), code=self._code, directory=self._directory, arch=self._arch)
        self._parsed = True

    @property
    def params(self) -> list[tuple[str, str, str]]:
        """``[(kind, name, C type)]`` of the kernel's parameters."""
        if not self._parsed:
            self._parse()
        return list(self._params)

    def handle(self, dtype, device: int) -> launch.KernelHandle:
        """The compiled kernel for ``dtype`` (None for a non-template kernel, the instantiation
        string for a kernel with explicit ``variants``) on ``device``."""
        h = self._handles.get((dtype, device))
        if h is None:
            if not self._parsed:
                self._parse()
            key = dtype if (self._template or self._variants) else None
            if key not in self.exprs:
                raise TypeError(f"kernel {self.name} has no instantiation for dtype {dtype}")
            acc = "f64" if dtype == torch.float64 else "f32"
            sig = tuple(acc if k == "acc" else k for k, _, _ in self._params)
            h = self._handles[(dtype, device)] = launch.kernel(self.key, self.exprs[key], device, sig)
        return h

    def __call__(self, *args, grid, block, shared_mem: int = 0) -> None:
        """Launch with ``args`` (one per kernel parameter) on torch's current stream.

        ``grid``/``block``: an int or a tuple of up to 3 ints. A grid with a zero dimension
        launches nothing. Raises ``TypeError``/``ValueError`` naming the argument that does
        not fit its parameter.
        """
        if not self._parsed:
            self._parse()
        params = self._params
        if len(args) != len(params):
            names = ", ".join(p for _, p, _ in params)
            raise TypeError(f"kernel {self.name}({names}) takes {len(params)} arguments, got {len(args)}")
        grid3, block3 = _dims("grid", grid), _dims("block", block)
        if block3[0] * block3[1] * block3[2] > 1024:
            raise ValueError(f"block must have at most 1024 threads, got {block3}")
        device, dtype, values = None, None, []
        for (kind, pname, ctype), a in zip(params, args):
            if kind == "ptr":
                if a is None:
                    values.append(0)
                    continue
                if not isinstance(a, torch.Tensor):
                    raise TypeError(f"argument {pname!r} of kernel {self.name} ({ctype}) must be a torch.Tensor or "
                                    f"None, got {type(a).__name__}")
                if not a.is_cuda:
                    raise ValueError(f"argument {pname!r} of kernel {self.name} must be a CUDA tensor, got a tensor "
                                     f"on {a.device}")
                if device is None:
                    device = a.get_device()
                    dtype = a.dtype
                elif a.get_device() != device:
                    raise ValueError(f"argument {pname!r} of kernel {self.name} must be on cuda:{device} like the "
                                     f"first tensor argument, got {a.device}")
                if not a.is_contiguous():
                    raise ValueError(f"argument {pname!r} of kernel {self.name} must be contiguous (kernels see raw "
                                     f"memory, not strides); pass .contiguous()")
                if self._template and re.search(rf"\b{self._template}\b", ctype) and a.dtype != dtype:
                    raise TypeError(f"argument {pname!r} of kernel {self.name} must have dtype {dtype} "
                                    f"({self._template} is {dtype}), got {a.dtype}")
                values.append(a.data_ptr())
            elif kind == "tmap":
                if not isinstance(a, (bytes, bytearray)) or len(a) != 128:
                    raise TypeError(f"argument {pname!r} of kernel {self.name} ({ctype}) must be the 128 bytes of a "
                                    f"TMA tensor map (cupy_ops.ops._tma.tensor_map), got {type(a).__name__}")
                values.append(bytes(a))
            elif kind in ("f32", "f64", "acc"):
                if isinstance(a, bool) or not isinstance(a, numbers.Real):
                    raise TypeError(f"argument {pname!r} of kernel {self.name} ({ctype}) must be a real number, "
                                    f"got {type(a).__name__}")
                values.append(float(a))
            else:
                if isinstance(a, bool) or not isinstance(a, numbers.Integral):
                    raise TypeError(f"argument {pname!r} of kernel {self.name} ({ctype}) must be an int, "
                                    f"got {type(a).__name__}")
                lo, hi = _I32 if kind == "i32" else _I64
                a = int(a)
                if not lo <= a <= hi:
                    raise ValueError(f"argument {pname!r} of kernel {self.name} ({ctype}) is out of range: {a}")
                # slots are unsigned 32-bit (i32) and signed 64-bit (i64): wrap to those ranges
                values.append(a & 0xFFFFFFFF if kind == "i32" else (a - 2**64 if a >= 2**63 else a))
        if device is None:
            raise ValueError(f"kernel {self.name} needs at least one CUDA tensor argument to pick its device")
        if self._template and dtype not in self.exprs:
            raise TypeError(f"kernel {self.name}: the first tensor argument picks {self._template}; it must be "
                            f"float32, float16, bfloat16 or float64, got {dtype}")
        if 0 in grid3:
            return
        h = self.handle(dtype if self._template else None, device)
        try:
            launch.launch(h, grid3, block3, values, shared_mem)
        except RuntimeError as exc:  # CuPy's CUDADriverError: e.g. too much shared memory
            raise RuntimeError(f"launching kernel {self.name} with grid {grid3}, block {block3} failed: {exc}") from None

    def __repr__(self) -> str:
        return f"cupy_ops.Kernel({self.name!r}, source={self.key!r})"


def _dims(what: str, v) -> tuple[int, int, int]:
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v),)
    if not isinstance(v, tuple) or not 1 <= len(v) <= 3 or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in v):
        raise TypeError(f"{what} must be a non-negative int or a tuple of 1 to 3 of them, got {v!r}")
    if what == "block" and 0 in v:
        raise ValueError(f"block dimensions must be positive, got {v!r}")
    return tuple(int(d) for d in v) + (1,) * (3 - len(v))
