"""A user kernel's launch arguments: grid, block and shared memory within CUDA's limits,
each scalar within its C type's range, each pointer a contiguous CUDA tensor (or another
library's CUDA array, viewed without a copy: DLPack or ``__cuda_array_interface__``), the
stream and the cluster shape. Errors are typed and name the argument and the kernel."""

from __future__ import annotations

import numbers
import struct

import torch

from .. import compiler, launch
from ..device import BLOCK_MAX, BLOCK_THREADS, GRID_MAX, MAX_CLUSTER, MemoryType
from .types import RANGES

# The largest finite float32 a double rounds to: from this magnitude on, rounding gives inf
# (struct would raise OverflowError); inf and NaN themselves pass as they are.
F32_OVERFLOW = 3.4028235677973366e38
# The same for bfloat16: the midpoint between its largest finite value and 2^128.
BF16_OVERFLOW = 3.3961775292304611e38
_FLOATS = frozenset(("f32", "f64", "f16", "bf16"))
_INF = float("inf")


def launch_dims(what: str, v) -> tuple[int, int, int]:
    """``grid`` / ``block`` of a kernel launch (an int or a tuple of 1 to 3 ints) as a 3-tuple,
    within CUDA's limits: ``TypeError`` for a wrong type, ``ValueError`` for a value out of
    range, naming the dimension."""
    cls = v.__class__
    if cls is int and 0 < v <= (GRID_MAX[0] if what == "grid" else BLOCK_MAX[0]):
        return (v, 1, 1)
    if cls is tuple and 1 <= len(v) <= 3:  # the common forms, checked without the slow path
        x, y, z = v + (1,) * (3 - len(v))
        if (
            x.__class__ is int
            and y.__class__ is int
            and z.__class__ is int
            and (
                (0 <= x <= GRID_MAX[0] and 0 <= y <= GRID_MAX[1] and 0 <= z <= GRID_MAX[2])
                if what == "grid"
                else (
                    0 < x <= BLOCK_MAX[0]
                    and 0 < y <= BLOCK_MAX[1]
                    and 0 < z <= BLOCK_MAX[2]
                    and x * y * z <= BLOCK_THREADS
                )
            )
        ):
            return (x, y, z)
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (v,)
    if (
        not isinstance(v, tuple)
        or not 1 <= len(v) <= 3
        or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in v)
    ):
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    v = tuple(int(d) for d in v) + (1,) * (3 - len(v))
    limits = GRID_MAX if what == "grid" else BLOCK_MAX
    for axis, d, most in zip("xyz", v, limits):
        if d < 0 or d > most or (what == "block" and d == 0):
            low = 1 if what == "block" else 0
            raise ValueError(
                f"{what} dimension {axis} (unsigned int {what}Dim.{axis}) must be in [{low}, {most}], got {d}"
            )
    if what == "block" and v[0] * v[1] * v[2] > BLOCK_THREADS:
        raise ValueError(f"block must have at most {BLOCK_THREADS} threads, got {v!r} ({v[0] * v[1] * v[2]})")
    return v


def shared_memory(v, limit: int | None = None) -> None:
    """``shared_mem`` of a launch: an int of bytes (``unsigned int sharedMemBytes``), at least 0
    and, when the device's ``limit`` (dynamic shared memory a block may opt in to) is given,
    at most that."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"shared_mem must be an int (bytes of dynamic shared memory), got {type(v).__name__}")
    if not 0 <= v <= 2**32 - 1:
        raise ValueError(f"shared_mem (unsigned int sharedMemBytes) must be in [0, 4294967295], got {v}")
    if limit is not None and v > limit:
        raise ValueError(
            f"shared_mem must be at most {limit} bytes, the dynamic shared memory a block may have on "
            f"this device, got {v}"
        )


def kernel_pointer(kernel: str, pname: str, ctype: str, a, foreign=None):
    """A pointer argument of a user kernel: ``None``, a contiguous CUDA tensor, or (given
    ``foreign``, which views it without a copy or refuses it) a CUDA array of another library,
    speaking DLPack or ``__cuda_array_interface__``. Returns what the kernel gets."""
    if a is None:
        return None
    if not isinstance(a, torch.Tensor):
        if foreign is None or not (hasattr(a, "__dlpack__") or hasattr(a, "__cuda_array_interface__")):
            raise TypeError(
                f"argument {pname!r} of kernel {kernel} ({ctype}) must be a torch.Tensor, a CUDA array "
                f"(DLPack or __cuda_array_interface__) or None, got {type(a).__name__}"
            )
        a = foreign(kernel, pname, ctype, a)
        if a is None:
            return None
    if not a.is_cuda:
        raise ValueError(f"argument {pname!r} of kernel {kernel} must be a CUDA tensor, got a tensor on {a.device}")
    if not a.is_contiguous():
        raise ValueError(
            f"argument {pname!r} of kernel {kernel} must be contiguous (kernels see raw memory, not "
            f"strides); pass .contiguous()"
        )
    if isinstance(a, torch.Tensor) and (a.is_neg() or a.is_conj()):
        # torch's lazy negation / conjugation (z.conj().imag, z.conj()): the memory holds the
        # values before it, which is what a kernel would read
        bit, fix = ("negative", "resolve_neg") if a.is_neg() else ("conjugate", "resolve_conj")
        raise ValueError(
            f"argument {pname!r} of kernel {kernel} has its {bit} bit set (a lazy view: its memory "
            f"holds the values before it); pass .{fix}()"
        )
    return a


_TYPESTRS = {
    "f2": torch.float16,
    "f4": torch.float32,
    "f8": torch.float64,
    "i1": torch.int8,
    "u1": torch.uint8,
    "b1": torch.bool,
    "i2": torch.int16,
    "i4": torch.int32,
    "i8": torch.int64,
    "c8": torch.complex64,
    "c16": torch.complex128,
}
for _bits in (16, 32, 64):  # torch >= 2.3 has the unsigned types
    if hasattr(torch, f"uint{_bits}"):
        _TYPESTRS[f"u{_bits // 8}"] = getattr(torch, f"uint{_bits}")


def cuda_array_interface(kernel: str, pname: str, ctype: str, iface) -> tuple[int, torch.dtype, int | None]:
    """A ``__cuda_array_interface__`` (versions 0 to 3) passed for pointer ``pname``: ``(device
    pointer, dtype, stream to wait for or None)``, read without touching the memory. Refused:
    masked arrays, arrays that are not C-contiguous, element types torch has not, byte
    orders other than the machine's, and stream 0 (which the interface forbids)."""
    where = f"argument {pname!r} of kernel {kernel} ({ctype})"
    if not isinstance(iface, dict) or "data" not in iface or "shape" not in iface or "typestr" not in iface:
        raise TypeError(
            f"{where}: its __cuda_array_interface__ must be a dict with data, shape and typestr, got {iface!r}"
        )
    if iface.get("mask") is not None:
        raise ValueError(f"{where}: masked arrays are not supported (__cuda_array_interface__ has a mask)")
    typestr = str(iface["typestr"])
    dtype = _TYPESTRS.get(typestr[1:])
    if dtype is None or typestr[0] not in "<|=":
        raise TypeError(
            f"{where}: element type {typestr!r} of its __cuda_array_interface__ has no torch dtype "
            f"(little-endian numbers only)"
        )
    shape = tuple(int(d) for d in iface["shape"])
    strides = iface.get("strides")
    if strides is not None:
        expected, size = [], dtype.itemsize
        for d in reversed(shape):
            expected.insert(0, size)
            size *= d
        if any(n != 1 and st != ex for n, st, ex in zip(shape, strides, expected)) and 0 not in shape:
            raise ValueError(
                f"argument {pname!r} of kernel {kernel} must be contiguous (kernels see raw memory, not "
                f"strides), got strides {tuple(strides)} for shape {shape}"
            )
    ptr = int(iface["data"][0] or 0)
    stream = iface.get("stream")
    if stream is not None:
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise TypeError(
                f"{where}: the stream of its __cuda_array_interface__ must be an int or None, got {stream!r}"
            )
        if stream == 0:
            raise ValueError(
                f"{where}: stream 0 in a __cuda_array_interface__ is ambiguous and the interface "
                f"forbids it (1: the legacy default stream, 2: the per-thread one)"
            )
    return ptr, dtype, stream


def launch_devices(kernel: str, pname: str, device: int, first: str, first_device: int) -> None:
    """``ValueError``: argument ``pname`` is on ``device`` but ``first`` on ``first_device``."""
    raise ValueError(
        f"argument {pname!r} of kernel {kernel} is on cuda:{device} but argument {first!r} is on "
        f"cuda:{first_device}: every array of one launch must be on one device (the launch runs "
        f"there)"
    )


def kernel_scalar(kernel: str, pname: str, ctype: str, kind: str, a, limits=None):
    """A scalar argument of a user kernel (``kind`` f32, f64, f16, bf16, i32, i64, tmap; ``limits``: the
    ``(lowest, highest, takes bool)`` of its C integer type, by default those of ``kind``):
    the value to pack. A value its C type cannot hold is a ``ValueError`` naming the argument,
    its type and the range (never a silent wrap, never struct's OverflowError). A bf16 value is
    returned as its bits (``launch.SLOTS`` packs them)."""
    cls = a.__class__
    if kind in _FLOATS:
        if cls is not float and (cls is bool or not isinstance(a, numbers.Real)):
            raise TypeError(
                f"argument {pname!r} of kernel {kernel} ({ctype}) must be a real number, got {type(a).__name__}"
            )
        try:
            a = float(a)
        except OverflowError:
            raise ValueError(
                f"argument {pname!r} of kernel {kernel} ({ctype}) must fit in a "
                f"{'float' if kind == 'f32' else 'double'}, got {a}"
            ) from None
        if kind == "f32" and not -F32_OVERFLOW < a < F32_OVERFLOW and a == a and a != _INF and a != -_INF:
            raise ValueError(
                f"argument {pname!r} of kernel {kernel} ({ctype}) must fit in a float (magnitude below "
                f"{F32_OVERFLOW:.9g}, else it rounds to inf), got {a!r}"
            )
        if kind == "f16":
            try:
                struct.pack("<e", a)
            except OverflowError:
                raise ValueError(
                    f"argument {pname!r} of kernel {kernel} ({ctype}) must fit in a half (magnitude "
                    f"below 65520, else it rounds to inf), got {a!r}"
                ) from None
        elif kind == "bf16":
            finite = a == a and a != _INF and a != -_INF
            bits = _bf16_bits(a) if not finite or abs(a) < F32_OVERFLOW else 0x7F80
            if finite and bits & 0x7FFF == 0x7F80:
                raise ValueError(
                    f"argument {pname!r} of kernel {kernel} ({ctype}) must fit in a bfloat16 "
                    f"(magnitude below {BF16_OVERFLOW:.9g}, else it rounds to inf), got {a!r}"
                )
            return bits
        return a
    if kind == "tmap":
        if not isinstance(a, (bytes, bytearray)) or len(a) != 128:
            raise TypeError(
                f"argument {pname!r} of kernel {kernel} ({ctype}) must be the 128 bytes of a TMA "
                f"tensor map, got {type(a).__name__}"
            )
        return bytes(a)
    lo, hi, takes_bool = limits if limits is not None else RANGES["int" if kind == "i32" else "long long"]
    if cls is not int:
        if (cls is bool or not isinstance(a, numbers.Integral)) and not (
            takes_bool and (cls is bool or type(a).__name__ in ("bool_", "bool"))  # numpy's bool
        ):
            raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be an int, got {type(a).__name__}")
        a = int(a)
    if not lo <= a <= hi:
        raise ValueError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be in [{lo}, {hi}], got {a}")
    # slots are unsigned 32-bit (i32) and signed 64-bit (i64): wrap to those ranges
    return a & 0xFFFFFFFF if kind == "i32" else (a - 2**64 if a >= 2**63 else a)


class ForeignArray:
    """A CUDA array of another library seen through its ``__cuda_array_interface__``: what a
    launch reads of a tensor (pointer, dtype, device), with no tensor made, hence no copy."""

    __slots__ = ("dtype", "index", "owner", "ptr")
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
        return True  # checked when it was read (cuda_array_interface)

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
    except Exception as exc:  # noqa: BLE001  ImportError, or the runtime's error (no driver, no GPU)
        raise ValueError(
            f"argument {pname!r} of kernel {kernel}: cannot tell which device holds its memory "
            f"(__cuda_array_interface__ pointer {ptr:#x}): {exc}"
        ) from None
    if attrs.type not in (MemoryType.DEVICE, MemoryType.MANAGED):
        raise ValueError(
            f"argument {pname!r} of kernel {kernel}: its __cuda_array_interface__ pointer {ptr:#x} is "
            f"not CUDA device memory (memory type {attrs.type})"
        )
    return int(attrs.device)


def wait_for(stream: int, device: int) -> None:
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
            rt.eventDestroy(event)  # released once the wait is enqueued: the wait still holds


def foreign(kernel: str, pname: str, ctype: str, a):
    """An array of another library for pointer ``pname``, viewed where it lives: through
    DLPack (torch reads its device, and its producer's stream is waited for), else through
    ``__cuda_array_interface__`` (its device from the driver). Never copied; None for an
    empty array (no memory to point at)."""
    if hasattr(a, "__dlpack__"):
        try:
            return torch.from_dlpack(a)
        except Exception as exc:  # noqa: BLE001  e.g. a dtype DLPack cannot carry
            if not hasattr(a, "__cuda_array_interface__"):
                raise TypeError(
                    f"argument {pname!r} of kernel {kernel} ({ctype}): torch cannot view this "
                    f"{type(a).__name__} through DLPack ({exc})"
                ) from None
    ptr, dtype, stream = cuda_array_interface(kernel, pname, ctype, a.__cuda_array_interface__)
    if ptr == 0:
        return None
    device = pointer_device(kernel, pname, ptr)
    if stream is not None:
        wait_for(stream, device)
    return ForeignArray(ptr, dtype, device, a)


def cluster_shape(cluster, grid3) -> tuple[int, int, int] | int:
    """``cluster=`` of a launch: an int (CTAs along x) or a tuple of 1 to 3 positive ints, at
    most ``MAX_CLUSTER`` CTAs, each dividing its ``grid3`` dimension (None: not checked).
    Returns 1 for a cluster of one CTA (a plain launch), else the ``(x, y, z)`` shape."""
    dims = (cluster,) if isinstance(cluster, int) and not isinstance(cluster, bool) else cluster
    if (
        not isinstance(dims, tuple)
        or not 1 <= len(dims) <= 3
        or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims)
    ):
        raise TypeError(f"cluster must be an int or a tuple of 1 to 3 ints, got {cluster!r}")
    dims = dims + (1,) * (3 - len(dims))
    for axis, d in zip("xyz", dims):
        if d < 1:
            raise ValueError(f"cluster dimension {axis} must be at least 1, got {d}")
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER:
        raise ValueError(f"cluster {dims} has {dims[0] * dims[1] * dims[2]} CTAs; a cluster has at most {MAX_CLUSTER}")
    if grid3 is not None:
        for axis, g, d in zip("xyz", grid3, dims):
            if g % d:
                raise ValueError(
                    f"grid dimension {axis} ({g}) must be a multiple of the cluster's ({d}): grid "
                    f"{grid3}, cluster {dims}"
                )
    return 1 if dims == (1, 1, 1) else dims


def stream_handle(stream, device: int) -> int:
    """``stream=`` of a launch as a raw ``cudaStream_t``: a ``torch.cuda.Stream``, a CuPy
    stream, an object with ``__cuda_stream__`` (cuda.core's protocol) or an int. ``ValueError``
    when it is on another device than ``device`` (the arrays'), ``TypeError`` for anything else."""
    where = None
    if isinstance(stream, torch.cuda.Stream):
        handle, where = stream.cuda_stream, stream.device.index
    elif hasattr(stream, "__cuda_stream__"):  # CuPy's streams, cuda.core's: (version, handle)
        got = stream.__cuda_stream__() if callable(stream.__cuda_stream__) else stream.__cuda_stream__
        handle = got[1] if isinstance(got, tuple) else got
        where = getattr(stream, "device_id", None)  # CuPy's
        where = where if isinstance(where, int) and where >= 0 else None  # -1: CuPy does not know
    elif isinstance(stream, int) and not isinstance(stream, bool):
        handle = stream
    else:
        raise TypeError(
            f"stream must be a torch.cuda.Stream, a CuPy stream, an object with __cuda_stream__ or a "
            f"cudaStream_t (int), got {type(stream).__name__}"
        )
    if not isinstance(handle, int) or handle < 0:
        raise TypeError(f"stream: the handle must be a non-negative int, got {handle!r}")
    if where is None:
        where = launch.stream_device(handle)
    if where is not None and where != device:
        raise ValueError(
            f"stream is on cuda:{where} but the kernel's arrays are on cuda:{device}; launch on a "
            f"stream of cuda:{device}"
        )
    return handle


def _bf16_bits(v: float) -> int:
    """The bfloat16 nearest ``v`` (through float32, ties to even, as torch converts), as bits."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    if v != v:
        return 0x7FC0
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
