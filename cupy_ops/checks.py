"""The argument contract of every op, in one place: types, dtypes, devices, shapes, ``out=``
and autograd state, divisors, and the arguments of user kernels.

Errors are typed and name the argument: ``TypeError`` for a wrong type or dtype,
``ValueError`` for a wrong device, shape or value, ``RuntimeError`` for an autograd conflict.
A CPU tensor is an error, never a silent copy to the GPU. The rules live here and nowhere
else: the ops' launchers call them, and so do the public functions (api.py) on the autograd
paths that compose our ops with torch's division.
"""
from __future__ import annotations

import numbers

import torch

from .dtypes import SUPPORTED, SUPPORTED_TEXT

_SUPPORTED = frozenset(SUPPORTED)


def tensor(name: str, x, dtypes=SUPPORTED) -> None:
    """``TypeError`` unless ``x`` is a torch tensor of one of ``dtypes``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype {SUPPORTED_TEXT}, got {x.dtype}")


def on_cuda(name: str, x: torch.Tensor) -> int:
    """The CUDA device index of ``x``; ``ValueError`` if it is not on a CUDA device."""
    if not x.is_cuda:
        raise ValueError(f"{name} must be a CUDA tensor, got a tensor on {x.device}; move it with .cuda() first")
    return x.get_device()


def cuda_tensor(name: str, x) -> int:
    """``tensor`` and ``on_cuda`` in one step (the eager path): the device index."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in _SUPPORTED:
        raise TypeError(f"{name} must have dtype {SUPPORTED_TEXT}, got {x.dtype}")
    if not x.is_cuda:
        raise ValueError(f"{name} must be a CUDA tensor, got a tensor on {x.device}; move it with .cuda() first")
    return x.get_device()


def same_dtype(name: str, x: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    """``TypeError`` if ``x`` and ``ref`` differ in dtype."""
    if x.dtype != ref.dtype:
        raise TypeError(f"{name} must have the same dtype as {ref_name} ({ref.dtype}), got {x.dtype}")


def same_device(name: str, x: torch.Tensor, ref_name: str, device: int) -> None:
    """``ValueError`` unless ``x`` is a CUDA tensor on device ``device`` (where ``ref_name`` is)."""
    if not x.is_cuda or x.get_device() != device:
        raise ValueError(f"{name} must be on the same device as {ref_name} (cuda:{device}), got {x.device}")


def choice(name: str, value, choices) -> None:
    """``ValueError`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def fits(name: str, value, reason: str | None) -> None:
    """``ValueError`` naming ``value`` when ``reason`` (why it cannot be used) is not None."""
    if reason is not None:
        raise ValueError(f"{name}={value!r} {reason}")


class ShapeError(ValueError, RuntimeError):
    """Operand shapes torch's matmul / linear refuse: a ``RuntimeError`` as torch raises it, and
    a ``ValueError`` as cupy_ops raises every shape error (as numpy's ``AxisError`` is both a
    ``ValueError`` and an ``IndexError``)."""


class DtypeMismatch(TypeError, RuntimeError):
    """Operands of two dtypes: a ``RuntimeError`` as torch's matmul / linear raise it, and a
    ``TypeError`` as cupy_ops raises every dtype error."""


def matrix(name: str, t, ref_name: str | None = None, ref: torch.Tensor | None = None) -> None:
    """``t`` is a 2-D tensor of a supported dtype (and of ``ref``'s dtype when given)."""
    tensor(name, t)
    if ref is not None:
        same_dtype(name, t, ref_name, ref)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor, got {t.dim()}-D with shape {tuple(t.shape)}")


def _operand(name: str, t, ref_name: str | None = None, ref: torch.Tensor | None = None) -> None:
    tensor(name, t)
    if ref is not None and t.dtype != ref.dtype:
        raise DtypeMismatch(f"{name} must have the same dtype as {ref_name} ({ref.dtype}), got {t.dtype}")


def _dims(m: tuple) -> str:
    return "x".join(map(str, m))


def broadcast_batch(a_batch: tuple, b_batch: tuple) -> tuple:
    """torch's broadcast of two batch shapes (aligned from the right, size 1 stretches);
    ``ShapeError`` with torch's words where they do not broadcast."""
    n = max(len(a_batch), len(b_batch))
    a_batch = (1,) * (n - len(a_batch)) + tuple(a_batch)
    b_batch = (1,) * (n - len(b_batch)) + tuple(b_batch)
    out = []
    for i, (p, q) in enumerate(zip(a_batch, b_batch)):
        if p != q and p != 1 and q != 1:
            raise ShapeError(f"The size of tensor a ({p}) must match the size of tensor b ({q}) at non-singleton "
                             f"dimension {i}: the batch dimensions of a {a_batch} and b {b_batch} do not broadcast")
        out.append(q if p == 1 else p)
    return tuple(out)


def matmul_shape(a: torch.Tensor, b: torch.Tensor) -> tuple:
    """The shape of ``torch.matmul(a, b)`` (both at least 1-D): a 1-D ``a`` is a row (its
    dimension removed from the result), a 1-D ``b`` a column (likewise); the dimensions before
    the last two are batch dimensions, broadcast. ``ShapeError`` as torch words it otherwise."""
    if a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0]:   # the eager hot path
        return a.shape[0], b.shape[1]
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]:   # torch.bmm's
        return a.shape[0], a.shape[1], b.shape[2]
    if a.dim() == 0 or b.dim() == 0:
        raise ShapeError(f"both arguments to matmul need to be at least 1D, but they are {a.dim()}D and {b.dim()}D")
    M, K = (1, a.shape[0]) if a.dim() == 1 else tuple(a.shape[-2:])
    K2, N = (b.shape[0], 1) if b.dim() == 1 else tuple(b.shape[-2:])
    if K != K2:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({_dims((M, K))} and {_dims((K2, N))}): "
                         f"a is {tuple(a.shape)} and b is {tuple(b.shape)} (inner dimensions differ: a's last "
                         f"must equal b's {'only' if b.dim() == 1 else 'second-to-last'})")
    batch = broadcast_batch(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return batch + ((M,) if a.dim() > 1 else ()) + ((N,) if b.dim() > 1 else ())


def matmul_args(a, b, algo, algos) -> tuple:
    """The arguments of ``matmul`` (torch.matmul's shapes): the output's shape."""
    _operand("a", a)
    _operand("b", b, "a", a)
    shape = matmul_shape(a, b)
    choice("algo", algo, algos)
    device = on_cuda("a", a)
    same_device("b", b, "a", device)
    return shape


def nonempty_output(M: int, N: int) -> None:
    """``ValueError`` for a GEMM output with no elements (no kernel runs for it)."""
    if M == 0 or N == 0:
        raise ValueError(f"no kernel runs for an empty output ({M} x {N})")


def linear_args(x, weight, bias, algo, algos) -> tuple:
    """The tensor arguments of ``linear_relu_div`` (the divisor: ``divisor``), as ``F.linear``
    takes them: ``x`` (*, in), ``weight`` (out, in), ``bias`` (out,) or None. The output's shape."""
    tensor("x", x)
    tensor("weight", weight)
    if weight.dtype != x.dtype:
        raise DtypeMismatch(f"weight must have the same dtype as x ({x.dtype}), got {weight.dtype}")
    if x.dim() == 0:
        raise ShapeError(f"both arguments to linear need to be at least 1D, but they are 0D and {weight.dim()}D")
    if weight.dim() != 2:
        raise ShapeError(f"weight must be a 2-D tensor (out_features, in_features), got {weight.dim()}-D with shape "
                         f"{tuple(weight.shape)}")
    if x.shape[-1] != weight.shape[1]:
        rows = prod(x.shape[:-1])
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and "
                         f"{weight.shape[1]}x{weight.shape[0]}): in_features differ: x is {tuple(x.shape)} and weight "
                         f"is {tuple(weight.shape)} (x.shape[-1] must equal weight.shape[1])")
    n = weight.shape[0]
    if bias is not None:
        tensor("bias", bias)
        if bias.dtype != x.dtype:
            raise DtypeMismatch(f"bias must have the same dtype as x ({x.dtype}), got {bias.dtype}")
        if tuple(bias.shape) != (n,):
            raise ShapeError(f"bias must have shape ({n},) to match weight, got {tuple(bias.shape)}")
    choice("algo", algo, algos)
    device = on_cuda("x", x)
    same_device("weight", weight, "x", device)
    if bias is not None:
        same_device("bias", bias, "x", device)
    return tuple(x.shape[:-1]) + (n,)


def prod(sizes) -> int:
    """The product of ``sizes`` (1 for none)."""
    out = 1
    for s in sizes:
        out *= s
    return out


def dense(x: torch.Tensor) -> bool:
    """torch's "non-overlapping and dense": the elements fill one gap-free block of memory in
    some order (contiguous tensors, their transposes and permutations). An elementwise kernel
    can walk such a tensor as a flat array."""
    if x.is_contiguous():
        return True
    expected = 1
    for stride, size in sorted((st, sz) for st, sz in zip(x.stride(), x.shape) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


_CLONE = "Please clone() the tensor before performing the operation."


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` may hold a common element: one storage and intersecting byte
    ranges (views that interleave without a common element count too: the cautious answer)."""
    if a.numel() == 0 or b.numel() == 0 or a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    (a0, a1), (b0, b1) = ((t.data_ptr(), t.data_ptr() + t.element_size() * (
        1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride())))) for t in (a, b))
    return a0 < b1 and b0 < a1


def _partial_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch's MemOverlapStatus::Partial (aten/src/ATen/MemoryOverlap.cpp): both dense, in one
    storage, their byte ranges intersect and they are not the same elements in the same order.
    Views torch cannot decide (not dense) are not refused, as torch does not refuse them."""
    if a is b or a.numel() == 0 or b.numel() == 0 or not (dense(a) and dense(b)):
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    a1, b1 = a0 + a.numel() * a.element_size(), b0 + b.numel() * b.element_size()
    if a0 == b0 and a1 == b1:
        return a.stride() != b.stride()
    return a0 < b1 and b0 < a1


def out(out, x: torch.Tensor, device: int | None, op_name: str, inputs: tuple = ()) -> None:
    """``out=`` (or ``x`` of an in-place form) may receive the result of ``op_name`` on ``x``
    (and the other tensors it reads, ``inputs``), as torch's TensorIterator allows:

    - type, dtype, shape and device (``device``; None: not checked) of ``out`` (``TypeError`` /
      ``ValueError``);
    - no element of ``out`` written twice (a broadcast ``out``), no partial overlap of ``out``
      with anything the op reads (full overlap, in place, is fine): ``RuntimeError`` with
      torch's message;
    - autograd (grad mode on): an ``out=`` op does not record a graph, so an input that
      requires grad is refused as torch refuses it; in place on a leaf that requires grad is
      refused with torch's message; other in-place calls autograd would have to record are
      refused here (the public ``cupy_ops.relu_`` and ``relu_div_`` record them: api.py).
    """
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    same_dtype("out", out, "x", x)
    if out.shape != x.shape:
        raise ValueError(f"out must have the shape of x {tuple(x.shape)}, got {tuple(out.shape)}")
    if device is not None:
        same_device("out", out, "x", device)
    if torch.is_grad_enabled():
        if out is x and (x.requires_grad or any(t.requires_grad for t in inputs)):
            if x.requires_grad and x.is_leaf:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            raise RuntimeError(f"cupy_ops.ops.{op_name}_ does not record in-place ops in the autograd graph; "
                               f"cupy_ops.{op_name}_ does (as torch records them)")
        if out is not x and (out.requires_grad or any(t.requires_grad for t in (x, *inputs))):
            raise RuntimeError(f"{op_name}(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad.")
    if not dense(out) and any(sz > 1 and st == 0 for sz, st in zip(out.shape, out.stride())):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a "
                           f"single memory location. {_CLONE}")
    for t in (x, *inputs):
        if _partial_overlap(out, t):
            raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                               f"refer to a single memory location. {_CLONE}")


def divisor(d, device: int, *, cuda_ok: bool = True, context: str = "") -> None:
    """``d`` is what torch accepts as the divisor of a CUDA tensor: a real number (an int within
    int64), a 0-dim real CPU tensor, or (when ``cuda_ok``) a one-element real tensor on CUDA
    device ``device``. ``context`` says why a CUDA tensor is refused."""
    if isinstance(d, torch.Tensor):
        if d.numel() != 1:
            raise ValueError(f"divisor must be a number or a one-element tensor, got a tensor of shape {tuple(d.shape)}")
        if d.is_complex():
            raise TypeError(f"divisor must be a real number, got a tensor of dtype {d.dtype}")
        if d.is_cuda:
            if not cuda_ok:
                raise ValueError(f"divisor must be a number or a 0-dim CPU tensor{context}, got a CUDA tensor")
            if d.get_device() != device:
                raise ValueError(f"divisor must be on the same device as x (cuda:{device}), got {d.device}")
        elif d.dim() != 0:
            # torch: "Expected all tensors to be on the same device" (only 0-dim CPU tensors mix)
            raise ValueError(f"divisor on the CPU must be a 0-dim tensor (as torch requires with a CUDA x), got "
                             f"shape {tuple(d.shape)}; use divisor.reshape(()) or move it to x's device")
        return
    if not isinstance(d, numbers.Real):   # (a bool is one: torch divides by 0 or 1)
        raise TypeError(f"divisor must be a real number or a one-element tensor, got {type(d).__name__}")
    if isinstance(d, numbers.Integral) and not -(2**63) <= d < 2**63:
        raise ValueError(f"divisor must fit in int64 as torch requires of an int, got {d}")


# --- user kernels (cupy_ops.Kernel) ------------------------------------------------------

_INT_RANGES = {("i32", False): (-(2**31), 2**31 - 1), ("i32", True): (0, 2**32 - 1),
               ("i64", False): (-(2**63), 2**63 - 1), ("i64", True): (0, 2**64 - 1)}
# The largest finite float32 a double rounds to: from this magnitude on, rounding gives inf
# (struct would raise OverflowError); inf and NaN themselves pass as they are.
F32_OVERFLOW = 3.4028235677973366e38
_INF = float("inf")
# CUDA's limits for every device: grid (x, y, z), block (x, y, z) and threads in a block.
GRID_MAX = (2**31 - 1, 65535, 65535)
BLOCK_MAX = (1024, 1024, 64)
BLOCK_THREADS = 1024
# Dynamic shared memory any block may use without opting in; more is checked against the
# device's own limit.
SHARED_DEFAULT = 48 * 1024


def launch_dims(what: str, v) -> tuple[int, int, int]:
    """``grid`` / ``block`` of a kernel launch (an int or a tuple of 1 to 3 ints) as a 3-tuple,
    within CUDA's limits: ``TypeError`` for a wrong type, ``ValueError`` for a value out of
    range, naming the dimension."""
    cls = v.__class__
    if cls is int and 0 < v <= (GRID_MAX[0] if what == "grid" else BLOCK_MAX[0]):
        return (v, 1, 1)
    if cls is tuple and 1 <= len(v) <= 3:     # the common forms, checked without the slow path
        x, y, z = v + (1,) * (3 - len(v))
        if x.__class__ is int and y.__class__ is int and z.__class__ is int and (
                (0 <= x <= GRID_MAX[0] and 0 <= y <= GRID_MAX[1] and 0 <= z <= GRID_MAX[2]) if what == "grid" else
                (0 < x <= BLOCK_MAX[0] and 0 < y <= BLOCK_MAX[1] and 0 < z <= BLOCK_MAX[2]
                 and x * y * z <= BLOCK_THREADS)):
            return (x, y, z)
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (v,)
    if not isinstance(v, tuple) or not 1 <= len(v) <= 3 or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in v):
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    v = tuple(int(d) for d in v) + (1,) * (3 - len(v))
    limits = GRID_MAX if what == "grid" else BLOCK_MAX
    for axis, d, most in zip("xyz", v, limits):
        if d < 0 or d > most or (what == "block" and d == 0):
            low = 1 if what == "block" else 0
            raise ValueError(f"{what} dimension {axis} (unsigned int {what}Dim.{axis}) must be in [{low}, {most}], "
                             f"got {d}")
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
        raise ValueError(f"shared_mem must be at most {limit} bytes, the dynamic shared memory a block may have on "
                         f"this device, got {v}")


def kernel_pointer(kernel: str, pname: str, ctype: str, a, foreign=None):
    """A pointer argument of a user kernel: ``None``, a contiguous CUDA tensor, or (given
    ``foreign``, which views it without a copy or refuses it) a CUDA array of another library,
    speaking DLPack or ``__cuda_array_interface__``. Returns what the kernel gets."""
    if a is None:
        return None
    if not isinstance(a, torch.Tensor):
        if foreign is None or not (hasattr(a, "__dlpack__") or hasattr(a, "__cuda_array_interface__")):
            raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be a torch.Tensor, a CUDA array "
                            f"(DLPack or __cuda_array_interface__) or None, got {type(a).__name__}")
        a = foreign(kernel, pname, ctype, a)
        if a is None:
            return None
    if not a.is_cuda:
        raise ValueError(f"argument {pname!r} of kernel {kernel} must be a CUDA tensor, got a tensor on {a.device}")
    if not a.is_contiguous():
        raise ValueError(f"argument {pname!r} of kernel {kernel} must be contiguous (kernels see raw memory, not "
                         f"strides); pass .contiguous()")
    return a


_TYPESTRS = {"f2": torch.float16, "f4": torch.float32, "f8": torch.float64, "i1": torch.int8, "u1": torch.uint8,
             "b1": torch.bool, "i2": torch.int16, "i4": torch.int32, "i8": torch.int64, "c8": torch.complex64,
             "c16": torch.complex128}
for _bits in (16, 32, 64):   # torch >= 2.3 has the unsigned types
    if hasattr(torch, f"uint{_bits}"):
        _TYPESTRS[f"u{_bits // 8}"] = getattr(torch, f"uint{_bits}")


def cuda_array_interface(kernel: str, pname: str, ctype: str, iface) -> tuple[int, torch.dtype, int | None]:
    """A ``__cuda_array_interface__`` (versions 0 to 3) passed for pointer ``pname``: ``(device
    pointer, dtype, stream to wait for or None)``, read without touching the memory. Refused:
    masked arrays, arrays that are not C-contiguous, element types torch has not, byte
    orders other than the machine's, and stream 0 (which the interface forbids)."""
    where = f"argument {pname!r} of kernel {kernel} ({ctype})"
    if not isinstance(iface, dict) or "data" not in iface or "shape" not in iface or "typestr" not in iface:
        raise TypeError(f"{where}: its __cuda_array_interface__ must be a dict with data, shape and typestr, got "
                        f"{iface!r}")
    if iface.get("mask") is not None:
        raise ValueError(f"{where}: masked arrays are not supported (__cuda_array_interface__ has a mask)")
    typestr = str(iface["typestr"])
    dtype = _TYPESTRS.get(typestr[1:])
    if dtype is None or typestr[0] not in "<|=":
        raise TypeError(f"{where}: element type {typestr!r} of its __cuda_array_interface__ has no torch dtype "
                        f"(little-endian numbers only)")
    shape = tuple(int(d) for d in iface["shape"])
    strides = iface.get("strides")
    if strides is not None:
        expected, size = [], dtype.itemsize
        for d in reversed(shape):
            expected.insert(0, size)
            size *= d
        if any(n != 1 and st != ex for n, st, ex in zip(shape, strides, expected)) and 0 not in shape:
            raise ValueError(f"argument {pname!r} of kernel {kernel} must be contiguous (kernels see raw memory, not "
                             f"strides), got strides {tuple(strides)} for shape {shape}")
    ptr = int(iface["data"][0] or 0)
    stream = iface.get("stream")
    if stream is not None:
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise TypeError(f"{where}: the stream of its __cuda_array_interface__ must be an int or None, got "
                            f"{stream!r}")
        if stream == 0:
            raise ValueError(f"{where}: stream 0 in a __cuda_array_interface__ is ambiguous and the interface "
                             f"forbids it (1: the legacy default stream, 2: the per-thread one)")
    return ptr, dtype, stream


def launch_devices(kernel: str, pname: str, device: int, first: str, first_device: int) -> None:
    """``ValueError``: argument ``pname`` is on ``device`` but ``first`` on ``first_device``."""
    raise ValueError(f"argument {pname!r} of kernel {kernel} is on cuda:{device} but argument {first!r} is on "
                     f"cuda:{first_device}: every array of one launch must be on one device (the launch runs "
                     f"there)")


def kernel_scalar(kernel: str, pname: str, ctype: str, kind: str, a, limits=None):
    """A scalar argument of a user kernel (``kind`` f32, f64, i32, i64, tmap; ``limits``: the
    ``(lowest, highest, takes bool)`` of its C integer type, by default those of ``kind``):
    the value to pack. A value its C type cannot hold is a ``ValueError`` naming the argument,
    its type and the range (never a silent wrap, never struct's OverflowError)."""
    cls = a.__class__
    if kind == "f32" or kind == "f64":
        if cls is not float and (cls is bool or not isinstance(a, numbers.Real)):
            raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be a real number, "
                            f"got {type(a).__name__}")
        try:
            a = float(a)
        except OverflowError:
            raise ValueError(f"argument {pname!r} of kernel {kernel} ({ctype}) must fit in a "
                             f"{'float' if kind == 'f32' else 'double'}, got {a}") from None
        if kind == "f32" and not -F32_OVERFLOW < a < F32_OVERFLOW and a == a and a != _INF and a != -_INF:
            raise ValueError(f"argument {pname!r} of kernel {kernel} ({ctype}) must fit in a float (magnitude below "
                             f"{F32_OVERFLOW:.9g}, else it rounds to inf), got {a!r}")
        return a
    if kind == "tmap":
        if not isinstance(a, (bytes, bytearray)) or len(a) != 128:
            raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be the 128 bytes of a TMA "
                            f"tensor map, got {type(a).__name__}")
        return bytes(a)
    lo, hi, takes_bool = limits if limits is not None else (*_INT_RANGES[(kind, False)], False)
    if cls is not int:
        if cls is bool or not isinstance(a, numbers.Integral):
            if not (takes_bool and (cls is bool or type(a).__name__ in ("bool_", "bool"))):   # numpy's bool
                raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be an int, got "
                                f"{type(a).__name__}")
        a = int(a)
    if not lo <= a <= hi:
        raise ValueError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be in [{lo}, {hi}], got {a}")
    # slots are unsigned 32-bit (i32) and signed 64-bit (i64): wrap to those ranges
    return a & 0xFFFFFFFF if kind == "i32" else (a - 2**64 if a >= 2**63 else a)
