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


def matrix(name: str, t, ref_name: str | None = None, ref: torch.Tensor | None = None) -> None:
    """``t`` is a 2-D tensor of a supported dtype (and of ``ref``'s dtype when given)."""
    tensor(name, t)
    if ref is not None:
        same_dtype(name, t, ref_name, ref)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor, got {t.dim()}-D with shape {tuple(t.shape)}")


def matmul_args(a, b, algo, algos) -> int:
    """The arguments of ``matmul``: the device index."""
    matrix("a", a)
    matrix("b", b, "a", a)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)} "
                         f"(a.shape[1] must equal b.shape[0])")
    choice("algo", algo, algos)
    device = on_cuda("a", a)
    same_device("b", b, "a", device)
    return device


def nonempty_output(M: int, N: int) -> None:
    """``ValueError`` for a GEMM output with no elements (no kernel runs for it)."""
    if M == 0 or N == 0:
        raise ValueError(f"no kernel runs for an empty output ({M} x {N})")


def linear_args(x, weight, bias, algo, algos) -> int:
    """The tensor arguments of ``linear_relu_div`` (the divisor: ``divisor``): the device index."""
    matrix("x", x)
    matrix("weight", weight, "x", x)
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"in_features differ: x is {tuple(x.shape)} and weight is {tuple(weight.shape)} "
                         f"(x.shape[1] must equal weight.shape[1])")
    n = weight.shape[0]
    if bias is not None:
        tensor("bias", bias)
        same_dtype("bias", bias, "x", x)
        if tuple(bias.shape) != (n,):
            raise ValueError(f"bias must have shape ({n},) to match weight, got {tuple(bias.shape)}")
    choice("algo", algo, algos)
    device = on_cuda("x", x)
    same_device("weight", weight, "x", device)
    if bias is not None:
        same_device("bias", bias, "x", device)
    return device


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


def launch_dims(what: str, v) -> tuple[int, int, int]:
    """``grid`` / ``block`` of a kernel launch as a 3-tuple (an int or 1 to 3 ints)."""
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v),)
    if not isinstance(v, tuple) or not 1 <= len(v) <= 3 or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in v):
        raise TypeError(f"{what} must be a non-negative int or a tuple of 1 to 3 of them, got {v!r}")
    if what == "block":
        if 0 in v:
            raise ValueError(f"block dimensions must be positive, got {v!r}")
        if v[0] * (v[1] if len(v) > 1 else 1) * (v[2] if len(v) > 2 else 1) > 1024:
            raise ValueError(f"block must have at most 1024 threads, got {v!r}")
    return tuple(int(d) for d in v) + (1,) * (3 - len(v))


def kernel_pointer(kernel: str, pname: str, ctype: str, a):
    """A pointer argument of a user kernel: ``None``, a contiguous CUDA tensor, or a CUDA array
    of another library (DLPack or ``__cuda_array_interface__``: a CuPy array, say), which is
    returned as a tensor viewing the same memory (no copy; DLPack makes torch's current
    stream wait for the array's producer stream). Returns what the kernel gets."""
    if a is None:
        return None
    if not isinstance(a, torch.Tensor):
        if hasattr(a, "__dlpack__"):
            a = torch.from_dlpack(a)
        elif hasattr(a, "__cuda_array_interface__"):
            a = torch.as_tensor(a, device="cuda")
        else:
            raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be a torch.Tensor, a CUDA array "
                            f"(DLPack or __cuda_array_interface__) or None, got {type(a).__name__}")
    if not a.is_cuda:
        raise ValueError(f"argument {pname!r} of kernel {kernel} must be a CUDA tensor, got a tensor on {a.device}")
    if not a.is_contiguous():
        raise ValueError(f"argument {pname!r} of kernel {kernel} must be contiguous (kernels see raw memory, not "
                         f"strides); pass .contiguous()")
    return a


def kernel_scalar(kernel: str, pname: str, ctype: str, kind: str, a, unsigned: bool = False):
    """A scalar argument of a user kernel (``kind`` f32, f64, i32, i64, tmap; ``unsigned``: of
    an unsigned C type): the value to pack. An int outside its C type's range is a
    ``ValueError`` naming the range (never a silent wrap)."""
    if kind == "tmap":
        if not isinstance(a, (bytes, bytearray)) or len(a) != 128:
            raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be the 128 bytes of a TMA "
                            f"tensor map, got {type(a).__name__}")
        return bytes(a)
    if kind in ("f32", "f64"):
        if isinstance(a, bool) or not isinstance(a, numbers.Real):
            raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be a real number, "
                            f"got {type(a).__name__}")
        return float(a)
    if isinstance(a, bool) or not isinstance(a, numbers.Integral):
        raise TypeError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be an int, got {type(a).__name__}")
    lo, hi = _INT_RANGES[(kind, unsigned)]
    a = int(a)
    if not lo <= a <= hi:
        raise ValueError(f"argument {pname!r} of kernel {kernel} ({ctype}) must be in [{lo}, {hi}], got {a}")
    # slots are unsigned 32-bit (i32) and signed 64-bit (i64): wrap to those ranges
    return a & 0xFFFFFFFF if kind == "i32" else (a - 2**64 if a >= 2**63 else a)
