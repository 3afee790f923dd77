"""``cupy_ops.Kernel``: your own CUDA C kernel, compiled by NVRTC and launched on torch tensors
with the machinery the built-in ops use (they are declared with ``Kernel.builtin``).

    scale = cupy_ops.Kernel('''
    template <class T>
    __global__ void scale(const T* x, T* y, float s, long long n) {
      long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
      if (i < n) y[i] = from_float<T>(to_float(x[i]) * s);
    }''', "scale")
    y = torch.empty_like(x)
    scale(x, y, 2.0, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)

The parameter list is read from the source, so each argument is checked and passed with the
right C type: tensors for pointers (CUDA, contiguous, on one device; arrays of other
libraries that speak DLPack or the CUDA array interface, such as CuPy arrays, are viewed as
tensors without a copy), Python numbers for
``float``/``double``/``int``/``long long``. A ``template <class T>`` kernel is instantiated
for float32 (``float``), float16 (``f16``), bfloat16 (``bf16``) and float64 (``double``); the
first tensor passed for a parameter of type ``T*`` picks ``T``. ``cuda_src/common.cuh`` is
pasted in before your code: it gives the ``f16``/``bf16`` element types and exact
conversions, ``to_float(x[i])`` and ``from_float<T>(v)`` (fp64 stays fp64). The kernel runs on
torch's current stream of the tensors' device. Each instantiation compiles on its first
launch and is cached per device and on disk; once the last ``Kernel`` object of a source is
gone, its loaded modules are released (after the launches queued from them have finished;
a kernel captured into a CUDA graph stays loaded for the graph's sake).
"""
from __future__ import annotations

import collections
import os
import re
import threading
import weakref
from pathlib import Path

import torch

from . import checks, compiler, launch
from .dtypes import CUDA_NAMES, SUPPORTED_TEXT

_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing)
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
_UNSIGNED = {"unsigned", "unsigned int", "uint32_t", "u32", "unsigned long long", "unsigned long", "uint64_t",
             "u64", "size_t"}
# What a pointer parameter may be given: its element type -> the torch dtypes of that type. The
# unsigned raw-bits types take any dtype of their size (common.cuh moves f16/bf16 as u16);
# types not listed (structs, typedefs, void) are not checked.
_POINTEES: dict[str, tuple] = {
    "float": (torch.float32,), "double": (torch.float64,),
    "f16": (torch.float16,), "__half": (torch.float16,), "half": (torch.float16,),
    "bf16": (torch.bfloat16,), "__nv_bfloat16": (torch.bfloat16,),
    "bool": (torch.bool,), "char": (torch.int8, torch.uint8), "signed char": (torch.int8,), "int8_t": (torch.int8,),
    "unsigned char": (torch.uint8, torch.bool), "uint8_t": (torch.uint8, torch.bool),
    "short": (torch.int16,), "int16_t": (torch.int16,),
    "int": (torch.int32,), "int32_t": (torch.int32,), "i32": (torch.int32,),
    "long long": (torch.int64,), "long long int": (torch.int64,), "int64_t": (torch.int64,), "i64": (torch.int64,),
    "long": (torch.int64,),
}
_UNSIGNED_SIZES = {"unsigned short": 2, "uint16_t": 2, "u16": 2, "unsigned": 4, "unsigned int": 4, "uint32_t": 4,
                   "u32": 4, "unsigned long long": 8, "unsigned long": 8, "uint64_t": 8, "u64": 8, "size_t": 8}


def _base_type(ctype: str) -> str:
    """``const float* __restrict__`` -> ``float``."""
    return " ".join(_QUALIFIERS.sub(" ", ctype.replace("*", " ").replace("[", " ").replace("]", " ")).split())


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


# `__global__ void`, then any launch attributes (`__launch_bounds__(...)`,
# `__cluster_dims__(...)`), then the kernel's name: the one pattern that finds a kernel.
KERNEL_HEAD = (r"__global__\s+void\s+"
               r"(?:(?:__launch_bounds__|__cluster_dims__)\s*\((?:[^()]|\([^()]*\))*\)\s*)*")


def strip_comments(code: str) -> str:
    """CUDA C ``code`` with its comments blanked (they may sit anywhere in a signature)."""
    return re.sub(r"//[^\n]*", " ", re.sub(r"/\*.*?\*/", " ", code, flags=re.S))


def kernel_names(code: str) -> list[str]:
    """The names of the ``__global__`` kernels defined in ``code``, in order, once each."""
    return list(dict.fromkeys(re.findall(KERNEL_HEAD + r"(\w+)\s*\(", strip_comments(code))))


def parse_signature(code: str, name: str) -> tuple[str | None, list[tuple[str, str, str]]]:
    """Find ``__global__ void name(...)`` in ``code``: ``(template_param, [(kind, pname, ctype)])``.

    ``kind`` is one of ``ptr``, ``i32``, ``i64``, ``f32``, ``f64``, ``tmap`` or ``acc`` (the
    compute type of the element type: f64 for double, else f32). ``template_param`` is the
    name of a single type parameter (``template <class T>``), or None. Raises ``ValueError``
    when the kernel is not found or a parameter has a type that cannot be passed from Python.
    """
    code = strip_comments(code)
    m = re.search(r"(template\s*<([^<>]*)>\s*)?(?:extern\s+\"C\"\s+)?" + KERNEL_HEAD + re.escape(name) + r"\s*\(",
                  code)
    if m is None:
        raise ValueError(f"no `__global__ void {name}(...)` found in the kernel source")
    template = None
    if m.group(2) is not None:
        tm = re.fullmatch(r"\s*(?:class|typename)\s+(\w+)\s*", m.group(2))
        template = tm.group(1) if tm else ""      # "": a template of other parameters
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


# User sources and how many live Kernel objects use each. A Kernel's finalizer only queues its
# source in _dead (a finalizer may run inside the garbage collector, on any thread, while this
# thread holds a lock); _release_dead settles the queue when the next Kernel is made: a source
# no Kernel uses any more is dropped from the registry, its binaries from memory, and its
# loaded modules retired (launch.retire: unloaded once no launch of theirs can be in flight).
_users: dict = {}
_dead: collections.deque = collections.deque()
_users_lock = threading.Lock()


def _release_dead() -> None:
    released = []
    with _users_lock:
        while _dead:
            src = _dead.popleft()
            _users[src] -= 1
            if _users[src] == 0:
                del _users[src]
                released.append(src)
    for src in released:
        compiler.release(src)
        variants = list(src.variants.values())
        for v in variants:
            compiler.drop(v)
        launch.retire(variants)


def _track(kernel: "Kernel", src) -> None:
    _release_dead()
    with _users_lock:
        _users[src] = _users.get(src, 0) + 1
    weakref.finalize(kernel, _dead.append, src)


class Kernel:
    """A CUDA C kernel from a file or a string, launched on torch tensors.

    Args:
        source: CUDA C code (a string), or the path of a ``.cu`` file (a ``Path``, or a string
            ending in ``.cu``/``.cuh`` without newlines), read now: a file edited later needs a
            new ``Kernel``. Quoted includes are looked up next to the file, then in cupy_ops'
            ``cuda_src/``.
        name: the ``__global__`` function to launch.
        signature: optional list of parameter kinds (``"ptr"``, ``"i32"``, ``"i64"``,
            ``"f32"``, ``"f64"``, ``"acc"``) when the parameter list cannot be read.
    Raises:
        TypeError: ``source`` or ``name`` of a wrong type.
        ValueError: the kernel is not in the source, or a parameter type is not supported.
        FileNotFoundError: the source file (or a file it includes) does not exist.
    Compile errors surface on first call as ``cupy_ops.KernelCompileError`` (a RuntimeError)
    with NVRTC's log; ``compile_offline("sm_90")`` (or ``python -m cupy_ops compile PATH.cu``)
    finds them without a GPU.

    Example:
        >>> axpy = cupy_ops.Kernel('''
        ... extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
        ...   int i = blockIdx.x * blockDim.x + threadIdx.x;
        ...   if (i < n) y[i] = a * x[i] + y[i];
        ... }''', "axpy")
        >>> x, y = torch.randn(1000, device="cuda"), torch.zeros(1000, device="cuda")
        >>> axpy(2.0, x, y, 1000, grid=cupy_ops.cdiv(1000, 256), block=256)   # y = 2 x
    """

    def __init__(self, source, name: str, *, signature=None):
        if not isinstance(name, str) or not name.isidentifier():
            raise TypeError(f"name must be the kernel's identifier (a str), got {name!r}")
        directory = None
        if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                                and source.strip().endswith((".cu", ".cuh"))):
            path = Path(source).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"kernel source {path} not found")
            code, directory, label = path.read_text(), path.parent, path.name
        elif isinstance(source, str):
            code, label = source, f"<kernel {name}>"
        else:
            raise TypeError(f"source must be CUDA code (str) or a path to a .cu file, got {type(source).__name__}")
        if '#include "common.cuh"' not in code:
            code = '#include "common.cuh"\n#line 1\n' + code   # the user's lines keep their numbers
        src = compiler.user(code, label, directory=directory)
        template, params = parse_signature(src.text(), name)
        if template == "":
            raise ValueError(f"kernel {name} is a template of other than one type parameter; cupy_ops.Kernel "
                             f"instantiates `template <class T>` kernels only")
        if signature is not None:
            if len(signature) != len(params):
                raise ValueError(f"signature has {len(signature)} entries but kernel {name} takes {len(params)} "
                                 f"parameters")
            params = [(k, p, c) for k, (_, p, c) in zip(signature, params)]
        exprs = {dt: f"{name}<{c}>" for dt, c in CUDA_NAMES.items()} if template else {None: name}
        self._setup(src, name, exprs, template, params)
        _track(self, src)

    @classmethod
    def builtin(cls, filename: str, name: str, variants, *, defines=None, arch: str | None = None) -> "Kernel":
        """A kernel of cupy_ops' own ``cuda_src/filename`` (read on first launch, not at import).

        ``variants``: the instantiations launched, as a list of name expressions (each its own
        key for ``handle``) or a dict ``{key: expression}`` (e.g. ``{torch.float32:
        "relu<float>"}``); they are registered now, for the offline check. ``defines``: ``-D``
        values (the geometry the host decides); ``arch``: the one architecture the file is
        built for (``"sm_90a"``), None for the device's own.
        """
        self = cls.__new__(cls)
        exprs = dict(variants) if isinstance(variants, dict) else {v: v for v in variants}
        self._setup(compiler.builtin(filename, defines=defines, arch=arch), name, exprs, None, None)
        return self

    def _setup(self, src, name, exprs, template, params) -> None:
        self.name = name
        self._source = src
        self._variants = {key: src.variant(e) for key, e in exprs.items()}   # registered now
        self._template = template
        self._params = params
        self._signatures: dict = {}

    @property
    def params(self) -> list[tuple[str, str, str]]:
        """``[(kind, name, C type)]`` of the kernel's parameters (a built-in file is read now)."""
        if self._params is None:
            self._template, self._params = parse_signature(self._source.text(), self.name)
        return list(self._params)

    @property
    def expressions(self) -> list[str]:
        """The instantiations this kernel launches (``"scale<float>"``, ... or its name)."""
        return [v.expr for v in self._variants.values()]

    def compile_offline(self, arch: str) -> list[compiler.OfflineResult]:
        """Compile every instantiation for ``arch`` (``"sm_90"``) with NVRTC, as the first launch
        would, without a GPU: one result per instantiation with its registers, spills and
        shared memory, or NVRTC's log (``ok`` False). ``python -m cupy_ops compile PATH.cu``
        prints these."""
        return compiler.compile_offline(self._source, arch, self.expressions)

    def variant(self, key) -> compiler.Variant:
        """The registered variant of ``key`` (a dtype, or an instantiation expression)."""
        v = self._variants.get(key)
        if v is None:
            raise TypeError(f"kernel {self.name} has no instantiation for {key}")
        return v

    def handle(self, key, device: int) -> launch.KernelHandle:
        """The launchable kernel of variant ``key`` on CUDA device ``device`` (compiled on first use)."""
        v = self.variant(key)
        h = launch.handles.get((v, device))
        if h is None:
            sig = self._signatures.get(key)
            if sig is None:
                acc = "f64" if key == torch.float64 else "f32"
                sig = self._signatures[key] = tuple(acc if k == "acc" else k for k, _, _ in self.params)
            h = launch.handle(v, device, sig)
        return h

    def _arg_plan(self) -> list[tuple]:
        """Per parameter, what a launch checks (read once): ``(kind, name, C type, unsigned,
        pointee dtypes or None, unsigned element size or None, picks the template type)``."""
        plan = self.__dict__.get("_plan")
        if plan is None:
            t_pattern = re.compile(rf"\b{self._template}\b") if self._template else None
            plan = []
            for kind, pname, ctype in self.params:
                base = _base_type(ctype)
                plan.append((kind, pname, ctype, base in _UNSIGNED, _POINTEES.get(base), _UNSIGNED_SIZES.get(base),
                             kind == "ptr" and t_pattern is not None and bool(t_pattern.search(ctype))))
            self._plan = plan
        return plan

    def __call__(self, *args, grid, block, shared_mem: int = 0) -> None:
        """Launch with ``args`` (one per kernel parameter) on torch's current stream.

        ``grid``/``block``: an int or a tuple of up to 3 ints. A grid with a zero dimension
        launches nothing. Raises ``TypeError``/``ValueError`` naming the argument that does
        not fit its parameter.
        """
        plan = self._arg_plan()
        if len(args) != len(plan):
            names = ", ".join(p[1] for p in plan)
            raise TypeError(f"kernel {self.name}({names}) takes {len(plan)} arguments, got {len(args)}")
        grid3, block3 = checks.launch_dims("grid", grid), checks.launch_dims("block", block)
        device, dtype, values = None, None, []
        for (kind, pname, ctype, unsigned, pointees, usize, picks), a in zip(plan, args):
            if kind != "ptr":
                values.append(checks.kernel_scalar(self.name, pname, ctype, "f64" if kind == "acc" else kind, a,
                                                   unsigned=unsigned))
                continue
            a = checks.kernel_pointer(self.name, pname, ctype, a)
            if a is None:
                values.append(0)
                continue
            if pointees is not None and a.dtype not in pointees:
                raise TypeError(f"argument {pname!r} of kernel {self.name} ({ctype}) must be a tensor of dtype "
                                f"{' or '.join(map(str, pointees))}, got {a.dtype}")
            if usize is not None and a.element_size() != usize:
                raise TypeError(f"argument {pname!r} of kernel {self.name} ({ctype}) must be a tensor of "
                                f"{usize}-byte elements, got {a.dtype}")
            if device is None:
                device = a.get_device()
            elif a.get_device() != device:
                raise ValueError(f"argument {pname!r} of kernel {self.name} must be on cuda:{device} like the first "
                                 f"tensor argument, got {a.device}")
            if picks:
                if dtype is None:
                    dtype = a.dtype
                    if dtype not in CUDA_NAMES:
                        raise TypeError(f"argument {pname!r} of kernel {self.name} picks {self._template}; it must "
                                        f"be {SUPPORTED_TEXT}, got {dtype}")
                elif a.dtype != dtype:
                    raise TypeError(f"argument {pname!r} of kernel {self.name} must have dtype {dtype} "
                                    f"({self._template} is {dtype}), got {a.dtype}")
            values.append(a.data_ptr())
        if device is None:
            raise ValueError(f"kernel {self.name} needs at least one CUDA tensor argument to pick its device")
        if self._template and dtype is None:
            raise TypeError(f"kernel {self.name}: no tensor was passed for a parameter of type {self._template}*, "
                            f"so {self._template} is unknown")
        if 0 in grid3:
            return
        h = self.handle(dtype, device)
        if not h.pinned and _capturing():
            h.pinned = True   # a CUDA graph holds this kernel now: never unload its module
        try:
            launch.launch(h, grid3, block3, values, shared_mem)
        except RuntimeError as exc:  # CuPy's CUDADriverError: e.g. too much shared memory
            raise RuntimeError(f"launching kernel {self.name} with grid {grid3}, block {block3} failed: {exc}") from None

    def __repr__(self) -> str:
        return f"cupy_ops.Kernel({self.name!r}, source={self._source.name!r})"
