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

The declaration is read from the source (``compiler.declarations``: any attribute and
qualifier order CUDA accepts, templates, namespaces), so each argument is checked and passed
with the right C type: tensors for pointers (CUDA, contiguous, on one device; arrays of other
libraries that speak DLPack or the CUDA array interface, such as CuPy arrays, are viewed as
tensors without a copy, on the device that holds them), Python numbers for ``float``,
``double``, ``bool`` and the integer types, each within its C type's range. A ``template
<class T>`` kernel is instantiated for float32 (``float``), float16 (``f16``), bfloat16
(``bf16``) and float64 (``double``), the first tensor passed for a parameter of type ``T*``
picking ``T``; any other instantiation is named by a name expression (``"tp<float, 4>"``) or
made with ``specialize``. ``cuda_src/common.cuh`` is pasted in before your code: it gives the
``f16``/``bf16`` element types and exact conversions, ``to_float(x[i])`` and
``from_float<T>(v)`` (fp64 stays fp64). The kernel runs on torch's current stream of the
arrays' device, or on ``stream=``; ``cluster=`` and ``cooperative=True`` launch it in
thread-block clusters or with the whole grid resident, ``occupancy`` asks the driver how it
fills the GPU, and ``cupy_ops.autotune`` chooses among its configurations (docs/kernel.md). Each instantiation compiles on its first launch and is cached per device and
on disk (its options, defines and every header it includes are part of the key); once the
last ``Kernel`` object of a source is gone, its loaded modules are released (after the
launches queued from them have finished; a kernel captured into a CUDA graph stays loaded for
the graph's sake).
"""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import threading
import weakref
from pathlib import Path

import torch

from . import checks, compiler, launch
from .compiler import declarations
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
    # narrower integers travel in a 32-bit slot: the driver copies only their own bytes
    "bool": "i32", "char": "i32", "unsigned char": "i32", "int8_t": "i32", "uint8_t": "i32",
    "short": "i32", "short int": "i32", "unsigned short": "i32", "int16_t": "i32", "uint16_t": "i32", "u16": "i32",
    "TmaMap": "tmap",   # gemm_wgmma.cuh's 128-byte TMA tensor map, passed by value (built-in kernels)
}
# Each scalar C type's size in bytes and, for integers, the values it holds.
_SIZES = {"float": 4, "double": 8, "TmaMap": 128}
_RANGES: dict[str, tuple[int, int, bool]] = {}
for _names, _size, _lo, _hi in [
        (("int", "int32_t", "i32"), 4, -(2**31), 2**31 - 1),
        (("unsigned", "unsigned int", "uint32_t", "u32"), 4, 0, 2**32 - 1),
        (("long long", "long long int", "long", "int64_t", "ptrdiff_t", "i64"), 8, -(2**63), 2**63 - 1),
        (("unsigned long long", "unsigned long", "uint64_t", "size_t", "u64"), 8, 0, 2**64 - 1),
        (("char", "int8_t"), 1, -128, 127), (("unsigned char", "uint8_t"), 1, 0, 255),
        (("short", "short int", "int16_t"), 2, -(2**15), 2**15 - 1),
        (("unsigned short", "uint16_t", "u16"), 2, 0, 2**16 - 1), (("bool",), 1, 0, 1)]:
    for _n in _names:
        _SIZES[_n] = _size
        _RANGES[_n] = (_lo, _hi, _n == "bool")
# What one argument slot of each kind holds (launch.SLOTS), in bytes.
_SLOT_BYTES = {"ptr": 8, "i64": 8, "f64": 8, "i32": 4, "f32": 4, "tmap": 128}
_SIGNATURE_KINDS = ("ptr", "i32", "i64", "f32", "f64", "acc", "tmap")
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
# torch dtypes as template arguments (specialize); the floating ones are common.cuh's names
_C_TYPES = {**CUDA_NAMES, torch.int8: "signed char", torch.uint8: "unsigned char", torch.int16: "short",
            torch.int32: "int", torch.int64: "long long", torch.bool: "bool"}


def _base_type(ctype: str) -> str:
    """``const float* __restrict__`` -> ``float``."""
    return " ".join(_QUALIFIERS.sub(" ", ctype.replace("*", " ").replace("[", " ").replace("]", " ")).split())


def kernel_names(code: str) -> list[str]:
    """The names of the ``__global__`` kernels defined in ``code``, in order, once each."""
    return declarations.kernel_names(code)


def _kind(ctype: str, pointer: bool) -> str | None:
    """The argument kind of a parameter of C type ``ctype`` (None: not passable)."""
    if pointer:
        return "ptr"
    if re.search(r"\bAcc\b", ctype):
        return "acc"
    return _KINDS.get(_base_type(ctype))


def parse_signature(code: str, name: str) -> tuple[str | None, list[tuple[str, str, str]]]:
    """Find kernel ``name`` in ``code``: ``(template_param, [(kind, pname, ctype)])``.

    ``kind`` is one of ``ptr``, ``i32``, ``i64``, ``f32``, ``f64``, ``tmap`` or ``acc`` (the
    compute type of the element type: f64 for double, else f32). ``template_param`` is the
    name of a single type parameter (``template <class T>``), ``""`` for a template of other
    parameters, or None. Raises ``ValueError`` when the kernel is not found or a parameter has
    a type that cannot be passed from Python.
    """
    decl = declarations.find(code, name)
    if decl is None:
        raise ValueError(f"no `__global__ void {name}(...)` found in the kernel source")
    params = [(p.ctype, p.pointer, p.name or f"arg{i}") for i, p in enumerate(decl.params)]
    return _template_name(decl), [(_checked_kind(name, c, ptr, n), n, c) for c, ptr, n in params]


def _template_name(decl) -> str | None:
    if decl.template is None:
        return None
    t = decl.template
    return t[0].name if len(t) == 1 and t[0].kind == "type" and not t[0].pack and t[0].name else ""


def _checked_kind(kernel: str, ctype: str, pointer: bool, pname: str) -> str:
    kind = _kind(ctype, pointer)
    if kind is None:
        raise ValueError(f"parameter {pname!r} of kernel {kernel} has type {ctype!r}, which cannot be passed from "
                         f"Python; use pointers, float, double, bool or an integer type (or pass signature=)")
    return kind


def _signature(kernel: str, signature, found) -> list[tuple[str, str, str]]:
    """``signature=``: a C parameter list (``"const float* x, int n"``), or a list whose
    entries are kinds (``"ptr"``, ``"i32"``, ...) or C parameter declarations. ``found``: the
    parameters read from the source (None when the kernel was not found), whose names a bare
    kind keeps."""
    if isinstance(signature, str):
        entries = declarations.parse_params(signature)
        entries = [(p.ctype, p.name, p.pointer) for p in entries]
    elif isinstance(signature, (list, tuple)):
        entries = []
        for e in signature:
            if not isinstance(e, str):
                raise TypeError(f"signature entries must be str (a kind such as 'ptr' or a C parameter such as "
                                f"'const float* x'), got {e!r}")
            if e in _SIGNATURE_KINDS:
                entries.append((None, e, None))
                continue
            parsed = declarations.parse_params(e)
            if len(parsed) != 1:
                raise ValueError(f"signature entry {e!r} is not one parameter declaration nor one of "
                                 f"{', '.join(_SIGNATURE_KINDS)}")
            entries.append((parsed[0].ctype, parsed[0].name, parsed[0].pointer))
    else:
        raise TypeError(f"signature must be a C parameter list (str) or a list of kinds / C parameters, got "
                        f"{type(signature).__name__}")
    if found is not None and len(entries) != len(found):
        raise ValueError(f"signature has {len(entries)} entries but kernel {kernel} takes {len(found)} parameters")
    out = []
    for i, (ctype, pname, pointer) in enumerate(entries):
        if ctype is None:                     # a bare kind: the name (and type) read from the source
            kind = pname
            pname, ctype = (found[i][1], found[i][2]) if found is not None else (f"arg{i}", kind)
            out.append((kind, pname or f"arg{i}", ctype))
        else:
            out.append((_checked_kind(kernel, ctype, pointer, pname), pname or f"arg{i}", ctype))
    return out


def _bind(decl, args: list[str], name: str) -> dict[str, str]:
    """Template parameter name -> argument text for the instantiation ``args`` of ``decl``
    (defaults filled in, themselves with the earlier arguments put in)."""
    params = decl.template
    pack = bool(params) and params[-1].pack
    fixed = params[:-1] if pack else params
    required = sum(1 for p in fixed if p.default is None)
    if len(args) < required or (len(args) > len(fixed) and not pack):
        counts = f"{required}" if required == len(fixed) and not pack else (
            f"{required} to {len(fixed)}" if not pack else f"at least {required}")
        raise ValueError(f"kernel {decl.qualified} is {decl.head}: it takes {counts} template arguments, got "
                         f"{len(args)} in {name!r}")
    mapping: dict[str, str] = {}
    for i, p in enumerate(fixed):
        text = args[i] if i < len(args) else declarations.substitute(declarations.tokenize(p.default), mapping)
        if p.name:
            mapping[p.name] = text
    return mapping


def _template_arg(a) -> str:
    """A template argument for ``specialize``: a torch dtype, a bool, an int or C text."""
    if isinstance(a, torch.dtype):
        c = _C_TYPES.get(a)
        if c is None:
            raise TypeError(f"no C type for template argument {a}")
        return c
    if isinstance(a, bool):
        return "true" if a else "false"
    if isinstance(a, int):
        return str(a)
    if isinstance(a, str) and a.strip():
        return a.strip()
    raise TypeError(f"a template argument must be a torch dtype, a bool, an int or C text (str), got {a!r}")


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


class _ForeignArray:
    """A CUDA array of another library seen through its ``__cuda_array_interface__``: what a
    launch reads of a tensor (pointer, dtype, device), with no tensor made, hence no copy."""

    __slots__ = ("ptr", "dtype", "index", "owner")
    is_cuda = True

    def __init__(self, ptr: int, dtype: torch.dtype, index: int, owner):
        self.ptr, self.dtype, self.index, self.owner = ptr, dtype, index, owner

    def data_ptr(self) -> int:
        return self.ptr

    def get_device(self) -> int:
        return self.index

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_contiguous(self) -> bool:
        return True            # checked when it was read (checks.cuda_array_interface)

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", self.index)


def pointer_device(kernel: str, pname: str, ptr: int) -> int:
    """The CUDA device holding the memory at ``ptr`` (the driver's pointer attributes): never
    assumed to be the current device. ``ValueError`` when it cannot be told or the memory is
    not device memory."""
    try:
        cupy = compiler.import_cupy()
        attrs = cupy.cuda.runtime.pointerGetAttributes(ptr)
    except Exception as exc:   # noqa: BLE001  ImportError, or the runtime's error (no driver, no GPU)
        raise ValueError(f"argument {pname!r} of kernel {kernel}: cannot tell which device holds its memory "
                         f"(__cuda_array_interface__ pointer {ptr:#x}): {exc}") from None
    if attrs.type not in (2, 3):   # cudaMemoryTypeDevice, cudaMemoryTypeManaged
        raise ValueError(f"argument {pname!r} of kernel {kernel}: its __cuda_array_interface__ pointer {ptr:#x} is "
                         f"not CUDA device memory (memory type {attrs.type})")
    return int(attrs.device)


def _wait_for(stream: int, device: int) -> None:
    """Order the launch after the producer's ``stream`` (the interface's rule): torch's current
    stream of ``device`` waits for an event recorded on it. Through the runtime, not
    ``torch.cuda.ExternalStream``: the interface names the legacy and per-thread default
    streams 1 and 2 (CuPy's arrays say 1), handles torch refuses."""
    rt = compiler.import_cupy().cuda.runtime
    with torch.cuda.device(device):
        event = rt.eventCreateWithFlags(rt.eventDisableTiming)
        try:
            rt.eventRecord(event, stream)
            rt.streamWaitEvent(torch.cuda.current_stream(device).cuda_stream, event, 0)
        finally:
            rt.eventDestroy(event)   # released once the wait is enqueued: the wait still holds


def _foreign(kernel: str, pname: str, ctype: str, a):
    """An array of another library for pointer ``pname``, viewed where it lives: through
    DLPack (torch reads its device, and its producer's stream is waited for), else through
    ``__cuda_array_interface__`` (its device from the driver). Never copied; None for an
    empty array (no memory to point at)."""
    if hasattr(a, "__dlpack__"):
        try:
            return torch.from_dlpack(a)
        except Exception as exc:   # noqa: BLE001  e.g. a dtype DLPack cannot carry
            if not hasattr(a, "__cuda_array_interface__"):
                raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}): torch cannot view this "
                                f"{type(a).__name__} through DLPack ({exc})") from None
    ptr, dtype, stream = checks.cuda_array_interface(kernel, pname, ctype, a.__cuda_array_interface__)
    if ptr == 0:
        return None
    device = pointer_device(kernel, pname, ptr)
    if stream is not None:
        _wait_for(stream, device)
    return _ForeignArray(ptr, dtype, device, a)


_smem_limits: dict[int, int] = {}


def _smem_limit(device: int) -> int:
    """The dynamic shared memory a block may opt in to on ``device`` (cached)."""
    limit = _smem_limits.get(device)
    if limit is None:
        cupy = compiler.import_cupy()
        attr = 97   # cudaDevAttrMaxSharedMemoryPerBlockOptin
        limit = _smem_limits[device] = int(cupy.cuda.runtime.deviceGetAttribute(attr, device))
    return limit


@dataclasses.dataclass(frozen=True)
class Occupancy:
    """``Kernel.occupancy``'s answer for one block shape and shared memory size.

    ``blocks_per_sm``: blocks one multiprocessor holds at once
    (cuOccupancyMaxActiveBlocksPerMultiprocessor; 0: such a block cannot run); ``sms``: the
    device's multiprocessors; ``resident_blocks``: ``blocks_per_sm * sms``, the largest grid
    resident at once (a cooperative launch's limit); ``occupancy``: resident warps over the
    most an SM holds; ``suggested_block`` and ``min_grid``: the block size reaching the
    highest occupancy with this shared memory and the fewest blocks that fill the device with
    it (cuOccupancyMaxPotentialBlockSize); ``clusters``: with ``cluster=``, the clusters
    resident at once (cuOccupancyMaxActiveClusters), else None."""

    blocks_per_sm: int
    sms: int
    resident_blocks: int
    occupancy: float
    suggested_block: int
    min_grid: int
    clusters: int | None = None


_attributes: dict[tuple[int, int], int] = {}


def _attribute(device: int, attr: int) -> int:
    """``cudaDeviceGetAttribute(attr, device)`` (cached)."""
    v = _attributes.get((device, attr))
    if v is None:
        v = _attributes[(device, attr)] = int(compiler.import_cupy().cuda.runtime.deviceGetAttribute(attr, device))
    return v


# CTAs a cluster may have: 8 on every GPU with clusters, 16 on Hopper once opted in
MAX_CLUSTER = 16


def cluster_shape(cluster, grid3) -> tuple[int, int, int] | int:
    """``cluster=`` of a launch: an int (CTAs along x) or a tuple of 1 to 3 positive ints, at
    most ``MAX_CLUSTER`` CTAs, each dividing its ``grid3`` dimension (None: not checked).
    Returns 1 for a cluster of one CTA (a plain launch), else the ``(x, y, z)`` shape."""
    dims = (cluster,) if isinstance(cluster, int) and not isinstance(cluster, bool) else cluster
    if not isinstance(dims, tuple) or not 1 <= len(dims) <= 3 or not all(
            isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise TypeError(f"cluster must be an int or a tuple of 1 to 3 ints, got {cluster!r}")
    dims = dims + (1,) * (3 - len(dims))
    for axis, d in zip("xyz", dims):
        if d < 1:
            raise ValueError(f"cluster dimension {axis} must be at least 1, got {d}")
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER:
        raise ValueError(f"cluster {dims} has {dims[0] * dims[1] * dims[2]} CTAs; a cluster has at most "
                         f"{MAX_CLUSTER}")
    if grid3 is not None:
        for axis, g, d in zip("xyz", grid3, dims):
            if g % d:
                raise ValueError(f"grid dimension {axis} ({g}) must be a multiple of the cluster's ({d}): grid "
                                 f"{grid3}, cluster {dims}")
    return 1 if dims == (1, 1, 1) else dims


def stream_handle(stream, device: int) -> int:
    """``stream=`` of a launch as a raw ``cudaStream_t``: a ``torch.cuda.Stream``, a CuPy
    stream, an object with ``__cuda_stream__`` (cuda.core's protocol) or an int. ``ValueError``
    when it is on another device than ``device`` (the arrays'), ``TypeError`` for anything else."""
    where = None
    if isinstance(stream, torch.cuda.Stream):
        handle, where = stream.cuda_stream, stream.device.index
    elif hasattr(stream, "__cuda_stream__"):   # CuPy's streams, cuda.core's: (version, handle)
        got = stream.__cuda_stream__() if callable(stream.__cuda_stream__) else stream.__cuda_stream__
        handle = got[1] if isinstance(got, tuple) else got
        where = getattr(stream, "device_id", None)   # CuPy's
        where = where if isinstance(where, int) and where >= 0 else None   # -1: CuPy does not know
    elif isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    else:
        raise TypeError(f"stream must be a torch.cuda.Stream, a CuPy stream, an object with __cuda_stream__ or a "
                        f"cudaStream_t (int), got {type(stream).__name__}")
    if not isinstance(handle, int) or handle < 0:
        raise TypeError(f"stream: the handle must be a non-negative int, got {handle!r}")
    if where is None:
        where = launch.stream_device(handle)
    if where is not None and where != device:
        raise ValueError(f"stream is on cuda:{where} but the kernel's arrays are on cuda:{device}; launch on a "
                         f"stream of cuda:{device}")
    return handle


class Kernel:
    """A CUDA C kernel from a file or a string, launched on torch tensors.

    Args:
        source: CUDA C code (a string), or the path of a ``.cu`` file (a ``Path``, or a string
            ending in ``.cu``/``.cuh`` without newlines), read now: a file edited later needs a
            new ``Kernel``. A quoted ``#include`` is looked up as a C compiler does: next to
            the file that includes it (your file, or the header), then in ``include_dirs``,
            then in cupy_ops' ``cuda_src/``; every header is pasted into the source (so an
            edited header recompiles), and NVRTC's messages name your files and lines.
        name: the ``__global__`` function to launch (qualified with its namespace if another
            kernel has its name), or a name expression of one instantiation of a template
            (``"tp<float, 4>"``). A ``template <class T>`` kernel named alone is instantiated
            for every supported dtype (the tensors pick one).
        options: NVRTC options for every compile of it, at run time and offline
            (``["-lineinfo", "--use_fast_math", "-maxrregcount=64"]``, or one string). Options
            that cannot work here (``-arch``: the launch picks it; ``-rdc=true``, ``-dlto``:
            output that does not load alone; ``-I``: use ``include_dirs``) and options NVRTC
            does not have are a ``ValueError`` naming them.
        defines: ``{"NAME": value}`` -> ``-DNAME=value`` (value an int, float, str, or None
            for ``-DNAME``).
        include_dirs: folders searched for included headers (see ``source``).
        signature: the parameter list, when you want to state it, or when a macro writes the
            kernel's declaration: a C parameter list (``"const float* x, int n"``), or a list
            of kinds (``"ptr"``, ``"i32"``, ``"i64"``, ``"f32"``, ``"f64"``, ``"acc"``) or C
            parameters. Either way it is checked against the compiled kernel's own parameter
            sizes before the first launch.
    Raises:
        TypeError: an argument of a wrong type.
        ValueError: the kernel is not in the source, a parameter type is not supported, a
            template argument list does not fit the template, an option or define is refused.
        FileNotFoundError: the source file or an include folder does not exist.
    Options, defines, the source and every header it includes are part of the compile cache
    key. Compile errors surface on first call as ``cupy_ops.KernelCompileError`` (a
    RuntimeError) with NVRTC's log; ``compile_offline("sm_90")`` (or ``python -m cupy_ops
    compile PATH.cu``) finds them without a GPU, and ``ptx(arch)`` / ``cubin(arch)`` export
    the compiled code.

    Example:
        >>> axpy = cupy_ops.Kernel('''
        ... extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
        ...   int i = blockIdx.x * blockDim.x + threadIdx.x;
        ...   if (i < n) y[i] = a * x[i] + y[i];
        ... }''', "axpy", options=["-lineinfo"])
        >>> x, y = torch.randn(1000, device="cuda"), torch.zeros(1000, device="cuda")
        >>> axpy(2.0, x, y, 1000, grid=cupy_ops.cdiv(1000, 256), block=256)   # y = 2 x
    """

    def __init__(self, source, name: str, *, options=(), defines=None, include_dirs=(), signature=None):
        if not isinstance(name, str):
            raise TypeError(f"name must be the kernel's name or a name expression (a str), got {name!r}")
        name = name.strip()
        try:
            base, targs = declarations.split_name(name)
        except ValueError as exc:
            raise ValueError(f"name: {exc}") from None
        path = None
        if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source
                                                and source.strip().endswith((".cu", ".cuh"))):
            path = Path(source).resolve()
            if not path.is_file():
                raise FileNotFoundError(f"kernel source {path} not found")
            code, label = path.read_text(), path.name
        elif isinstance(source, str):
            code, label = source, f"<kernel {base}>"
        else:
            raise TypeError(f"source must be CUDA code (str) or a path to a .cu file, got {type(source).__name__}")
        dirs = _include_dirs(include_dirs)
        flags = compiler.check_options(options)
        compiler.check_defines(defines)
        # common.cuh (f16, bf16, conversions) comes first unless the code includes it itself
        prelude = () if re.search(r'#\s*include\s*"common\.cuh"', code) else ("common.cuh",)
        text = compiler.assemble_user(code, label, path=path, include_dirs=dirs, prelude=prelude)
        decl = declarations.find(text, base)
        if decl is None and signature is None:
            raise ValueError(f"no `__global__ void {base}(...)` found in the kernel source (if a macro writes its "
                             f"declaration, pass signature=)")
        template, exprs, params = self._instantiation(decl, name, base, targs, strict=signature is None)
        self._stated = None
        if signature is not None:
            # a stated parameter list: its own source entry, so a variant's compiled layout
            # is checked against the list it is launched with
            params = self._stated = _signature(name, signature, params if decl is not None else None)
        src = compiler.user(code, label, defines=defines, options=flags, assembled=text,
                            tag=None if self._stated is None else tuple(self._stated))
        self._declaration = decl
        self._setup(src, name, exprs, template, params)
        _track(self, src)

    @staticmethod
    def _instantiation(decl, name: str, base: str, targs, strict: bool = True):
        """``(template parameter picked by dtype or None, {key: name expression}, params)``
        of kernel ``name`` (``base`` and its template arguments ``targs``) declared by
        ``decl`` (None: not found, a ``signature=`` follows). ``strict``: a parameter type
        that cannot be passed is an error (else its kind is None: a signature states it)."""
        if decl is None:
            return None, {None: name}, None
        qualified = decl.qualified
        mapping: dict[str, str] = {}
        template = None
        if decl.template is None:
            if targs is not None:
                raise ValueError(f"kernel {qualified} is not a template, but {name!r} gives template arguments")
            exprs = {None: qualified}
        elif targs is None:
            template = _template_name(decl)
            if not template:
                raise ValueError(f"kernel {qualified} is {decl.head}: name one instantiation, e.g. "
                                 f"Kernel(source, \"{qualified}<...>\"), then .specialize(...) for others; "
                                 f"cupy_ops.Kernel instantiates a `template <class T>` kernel per dtype by itself")
            exprs = {dt: f"{qualified}<{c}>" for dt, c in CUDA_NAMES.items()}
        else:
            mapping = _bind(decl, targs, name)
            exprs = {None: f"{qualified}<{', '.join(targs)}>"}
        params = []
        for i, p in enumerate(decl.params):
            ctype, pointer = p.ctype, p.pointer
            if mapping:
                ctype = declarations.substitute(p.tokens, mapping)
                pointer = pointer or declarations.is_pointer(ctype)
            pname = p.name or f"arg{i}"
            kind = _checked_kind(name, ctype, pointer, pname) if strict else _kind(ctype, pointer)
            params.append((kind, pname, ctype))
        return template, exprs, params

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
        self._declaration = self._stated = None
        self._setup(compiler.builtin(filename, defines=defines, arch=arch), name, exprs, None, None)
        return self

    def _setup(self, src, name, exprs, template, params) -> None:
        self.name = name
        self._source = src
        self._variants = {key: src.variant(e) for key, e in exprs.items()}   # registered now
        self._template = template
        self._params = params
        self._signatures: dict = {}
        if params is not None:
            # what the compiled kernels must agree with, checked on each binary NVRTC builds
            for key, v in self._variants.items():
                v.layout = tuple(self._layout(key))

    def _layout(self, key):
        """``[(name, C type, exact bytes or None, at most bytes)]`` of the variant of ``key``."""
        for kind, pname, ctype in self._params:
            if kind == "acc":
                kind = "f64" if key == torch.float64 else "f32"
            base = _base_type(ctype)
            exact = 8 if kind == "ptr" else _SIZES.get(base)
            if exact is None and kind != "i32":
                exact = _SLOT_BYTES[kind]      # a stated kind of another type: the slot's size
            yield pname, ctype, exact, _SLOT_BYTES[kind]

    @property
    def params(self) -> list[tuple[str, str, str]]:
        """``[(kind, name, C type)]`` of the kernel's parameters (a built-in file is read now)."""
        if self._params is None:
            self._template, self._params = parse_signature(self._source.text(), self.name)
        return list(self._params)

    @property
    def declaration(self):
        """The kernel's declaration as read from its source (``compiler.declarations``): its
        qualified name, template head, parameters and attributes (``__launch_bounds__``, ...);
        None when ``signature=`` stood in for a declaration not found."""
        if self._declaration is None and self._source.builtin:
            self._declaration = declarations.find(self._source.text(), self.name)
        return self._declaration

    @property
    def expressions(self) -> list[str]:
        """The instantiations this kernel launches (``"scale<float>"``, ... or its name)."""
        return [v.expr for v in self._variants.values()]

    def specialize(self, *args) -> "Kernel":
        """The kernel of another instantiation of this template: ``args`` are its template
        arguments, each a torch dtype (its C type: ``f16``, ``bf16``, ``float``, ``int``, ...),
        a bool, an int or C text. ``Kernel(src, "tp<float, 4>").specialize(torch.float64, 8)``
        is ``tp<double, 8>``, compiled from the same source with the same options (each
        instantiation compiles on its own first launch)."""
        if self._source.builtin:
            raise TypeError("specialize is for your own kernels; a built-in kernel's variants are declared with it")
        decl = self.declaration
        if decl is None or decl.template is None:
            raise TypeError(f"kernel {self.name} is not a template: there is nothing to specialize")
        targs = [_template_arg(a) for a in args]
        name = f"{decl.qualified}<{', '.join(targs)}>"
        template, exprs, params = self._instantiation(decl, name, decl.qualified, targs, strict=self._stated is None)
        if self._stated is not None:
            params = self._stated
        new = Kernel.__new__(Kernel)
        new._stated = self._stated
        new._declaration = decl
        new._setup(self._source, name, exprs, template, params)
        _track(new, self._source)
        return new

    def compile_offline(self, arch: str) -> list[compiler.OfflineResult]:
        """Compile every instantiation for ``arch`` (``"sm_90"``) with NVRTC, as the first launch
        would, without a GPU: one result per instantiation with its registers, spills and
        shared memory, or NVRTC's log (``ok`` False). ``python -m cupy_ops compile PATH.cu``
        prints these."""
        return compiler.compile_offline(self._source, arch, self.expressions)

    def export(self, arch: str, fmt: str, dtype=None) -> compiler.Export:
        """The compiled code of this kernel for ``arch``, by NVRTC on the CPU (no GPU): ``fmt``
        ``"ptx"`` (``-arch=compute_XX``) or ``"cubin"`` (``-arch=sm_XX``), with the options of a
        launch. One module holds every instantiation (``dtype``: only that one of a per-dtype
        template); ``Export.lowered`` maps each name expression to its symbol in it. Raises
        ``KernelCompileError`` with NVRTC's log."""
        exprs = self.expressions if dtype is None else [self.variant(dtype).expr]
        return compiler.export(self._source, arch, exprs, fmt)

    def ptx(self, arch: str, dtype=None) -> str:
        """The PTX of this kernel for ``arch`` (``"sm_90"`` or ``"compute_90"``): ``export``'s."""
        return self.export(arch, "ptx", dtype).image

    def cubin(self, arch: str, dtype=None) -> bytes:
        """The cubin of this kernel for ``arch`` (``"sm_90"``): ``export``'s."""
        return self.export(arch, "cubin", dtype).image

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
        """Per parameter, what a launch checks (read once): ``(kind, name, C type, integer
        limits or None, pointee dtypes or None, unsigned element size or None, picks the
        template type)``."""
        plan = self.__dict__.get("_plan")
        if plan is None:
            t_pattern = re.compile(rf"\b{self._template}\b") if self._template else None
            plan = []
            for kind, pname, ctype in self.params:
                base = _base_type(ctype)
                limits = None
                if kind in ("i32", "i64"):   # a stated kind of another C type: the slot's signed range
                    limits = _RANGES.get(base) or _RANGES["int" if kind == "i32" else "long long"]
                plan.append((kind, pname, ctype, limits, _POINTEES.get(base) if kind == "ptr" else None,
                             _UNSIGNED_SIZES.get(base) if kind == "ptr" else None,
                             kind == "ptr" and t_pattern is not None and bool(t_pattern.search(ctype))))
            self._acc = tuple(i for i, p in enumerate(plan) if p[0] == "acc")
            self._plan = plan
        return plan

    def __call__(self, *args, grid, block, shared_mem: int = 0, stream=None, cluster=None,
                 cooperative: bool = False) -> None:
        """Launch with ``args`` (one per kernel parameter) on torch's current stream of the
        arrays' device.

        ``grid``/``block``: an int or a tuple of up to 3 ints, within CUDA's limits; a grid
        with a zero dimension launches nothing. ``shared_mem``: bytes of dynamic shared
        memory, within the device's limit (past 48 KB the kernel is opted in for it).
        ``stream``: the stream to launch on instead, a ``torch.cuda.Stream``, a CuPy stream,
        an object with ``__cuda_stream__`` or a raw ``cudaStream_t`` (an int); it must be on
        the arrays' device. ``cluster``: thread-block clusters, an int (CTAs along x) or an
        ``(x, y, z)`` tuple dividing the grid, at most 16 CTAs (above 8 the kernel is opted in
        to non-portable sizes; compute capability 9.0 and newer). ``cooperative``: every
        block resident at once, so ``cooperative_groups::this_grid().sync()`` works; a grid
        larger than ``occupancy(block, shared_mem).resident_blocks`` is a ``ValueError``.
        Raises ``TypeError``/``ValueError`` naming the argument that does not fit its
        parameter (a number out of its C type's range included).
        """
        plan = self._arg_plan()
        if len(args) != len(plan):
            names = ", ".join(p[1] for p in plan)
            raise TypeError(f"kernel {self.name}({names}) takes {len(plan)} arguments, got {len(args)}")
        grid3, block3 = checks.launch_dims("grid", grid), checks.launch_dims("block", block)
        if shared_mem.__class__ is not int or not 0 <= shared_mem <= checks.SHARED_DEFAULT:
            checks.shared_memory(shared_mem)
        device, dtype, values, first = None, None, [], None
        for (kind, pname, ctype, limits, pointees, usize, picks), a in zip(plan, args):
            if kind != "ptr":
                values.append(checks.kernel_scalar(self.name, pname, ctype, "f64" if kind == "acc" else kind, a,
                                                   limits))
                continue
            a = checks.kernel_pointer(self.name, pname, ctype, a, _foreign)
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
                device, first = a.get_device(), pname
            elif a.get_device() != device:
                checks.launch_devices(self.name, pname, a.get_device(), first, device)
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
        if self._acc and dtype != torch.float64:   # Acc is float here: it must fit one
            for i in self._acc:
                checks.kernel_scalar(self.name, plan[i][1], plan[i][2] + " (float)", "f32", values[i])
        if shared_mem > checks.SHARED_DEFAULT:
            checks.shared_memory(shared_mem, _smem_limit(device))
        if stream is not None:
            stream = stream_handle(stream, device)
        if cluster is not None:
            cluster = cluster_shape(cluster, grid3)
        if 0 in grid3:
            return
        h = self.handle(dtype, device)
        if not h.pinned and _capturing():
            h.pinned = True   # a CUDA graph holds this kernel now: never unload its module
        if cooperative:
            self._check_cooperative(h, grid3, block3, shared_mem)
        try:
            if stream is None and cluster is None and not cooperative:
                launch.launch(h, grid3, block3, values, shared_mem)
            else:
                launch.launch(h, grid3, block3, values, shared_mem, cluster or 1, stream=stream,
                              cooperative=bool(cooperative))
        except RuntimeError as exc:  # CuPy's CUDADriverError: e.g. too much shared memory
            raise RuntimeError(f"launching kernel {self.name} with grid {grid3}, block {block3} failed: "
                               f"{exc}") from None

    def _check_cooperative(self, h, grid3, block3, shared_mem: int) -> None:
        """A cooperative grid must be resident at once: at most blocks per SM x SMs blocks."""
        if not _attribute(h.device, 95):    # cudaDevAttrCooperativeLaunch
            raise ValueError(f"cooperative=True: cuda:{h.device} does not support cooperative launches")
        per_sm = launch.blocks_per_sm(h, block3, shared_mem)
        most = per_sm * _attribute(h.device, 16)   # cudaDevAttrMultiProcessorCount
        blocks = grid3[0] * grid3[1] * grid3[2]
        if blocks > most:
            raise ValueError(f"cooperative=True: grid {grid3} has {blocks} blocks, but at most {most} blocks of kernel "
                             f"{self.name} (block {block3}, {shared_mem} bytes of dynamic shared memory) are resident "
                             f"on cuda:{h.device} at once ({per_sm} per SM); a cooperative grid must all be resident")

    def variant_key(self, *args):
        """The key of the instantiation a launch with ``args`` takes: the dtype of the first
        tensor passed for a ``T*`` parameter of a per-dtype template, else None."""
        if not self._template:
            return None
        for p, a in zip(self._arg_plan(), args):
            if p[6] and a is not None:
                dtype = getattr(a, "dtype", None)
                if dtype is None and hasattr(a, "__cuda_array_interface__"):
                    dtype = checks.cuda_array_interface(self.name, p[1], p[2], a.__cuda_array_interface__)[1]
                if isinstance(dtype, torch.dtype):
                    return dtype
        raise TypeError(f"kernel {self.name}: no tensor was passed for a parameter of type {self._template}*, "
                        f"so {self._template} is unknown")

    def occupancy(self, block, shared_mem: int = 0, *, dtype=None, device=None, cluster=None) -> "Occupancy":
        """How this kernel fills a GPU, as the driver computes it: blocks of ``block`` threads
        (an int or a tuple) with ``shared_mem`` bytes of dynamic shared memory each.

        ``dtype``: the instantiation of a per-dtype template (as ``ptx``/``export`` take it;
        required for one, else not allowed); ``device``: a CUDA device (default the current
        one); ``cluster``: also ask how many such clusters are resident at once. Compiles
        and loads the kernel on ``device``. Returns an ``Occupancy``. Raises ``TypeError``
        for a missing ``dtype``, ``ValueError`` for a block or shared memory out of range.
        """
        if self._template and dtype is None:
            raise TypeError(f"kernel {self.name} is instantiated per dtype: pass dtype= (e.g. torch.float32)")
        if not self._template and dtype is not None:
            raise TypeError(f"kernel {self.name} has one instantiation ({self.expressions[0]}): dtype= picks none")
        block3 = checks.launch_dims("block", block)
        checks.shared_memory(shared_mem)
        if device is not None:
            device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
            if device.type != "cuda":
                raise ValueError(f"device must be a CUDA device, got {device}")
            device = device.index
        if device is None:
            device = torch.cuda.current_device()
        if shared_mem > checks.SHARED_DEFAULT:
            checks.shared_memory(shared_mem, _smem_limit(device))
        h = self.handle(dtype, device)
        per_sm = launch.blocks_per_sm(h, block3, shared_mem)
        sms = _attribute(device, 16)
        threads = block3[0] * block3[1] * block3[2]
        warps = -(-threads // 32) * per_sm
        max_warps = _attribute(device, 39) // 32   # cudaDevAttrMaxThreadsPerMultiProcessor
        suggested, min_grid = launch.suggested_block(h, shared_mem)
        clusters = None
        if cluster is not None:
            clusters = launch.resident_clusters(h, launch.cluster_dims(cluster_shape(cluster, None)), block3,
                                                shared_mem)
        return Occupancy(per_sm, sms, per_sm * sms, warps / max_warps if max_warps else 0.0, suggested, min_grid,
                         clusters)

    def __repr__(self) -> str:
        return f"cupy_ops.Kernel({getattr(self, 'name', '?')!r}, source={getattr(self, '_source', None)!r})"


def _include_dirs(dirs) -> list[Path]:
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    out = []
    for d in dirs:
        if not isinstance(d, (str, os.PathLike)):
            raise TypeError(f"include_dirs must be folders (str or Path), got {d!r}")
        p = Path(d).resolve()
        if not p.is_dir():
            raise FileNotFoundError(f"include folder {p} not found")
        out.append(p)
    return out
