"""The argument contract of every op, in one place: types, dtypes, devices, shapes, ``out=``
and autograd state, divisors. (A user kernel's launch arguments are checked with the kernel:
``cupy_ops.kernel.arguments``.)

Errors are typed and name the argument: ``TypeError`` for a wrong type or dtype,
``ValueError`` for a wrong device, shape or value, ``RuntimeError`` for an autograd conflict.
A CPU tensor is an error, never a silent copy to the GPU. The rules live here and nowhere
else: the ops' launchers call them, and so do the public functions on the autograd paths that
compose our ops with torch's division. Where cupy_ops answers as torch does, torch's words
live here too (``LEAF_IN_PLACE``, ``out_requires_grad``, ``broadcast_mismatch``,
``resize_out``, ``out_dtype``, the matmul / linear shape errors).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
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
            raise ShapeError(
                f"The size of tensor a ({p}) must match the size of tensor b ({q}) at non-singleton "
                f"dimension {i}: the batch dimensions of a {a_batch} and b {b_batch} do not broadcast"
            )
        out.append(q if p == 1 else p)
    return tuple(out)


def matmul_shape(a: torch.Tensor, b: torch.Tensor) -> tuple:
    """The shape of ``torch.matmul(a, b)`` (both at least 1-D): a 1-D ``a`` is a row (its
    dimension removed from the result), a 1-D ``b`` a column (likewise); the dimensions before
    the last two are batch dimensions, broadcast. ``ShapeError`` as torch words it otherwise."""
    if a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0]:  # the eager hot path
        return a.shape[0], b.shape[1]
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]:  # torch.bmm's
        return a.shape[0], a.shape[1], b.shape[2]
    if a.dim() == 0 or b.dim() == 0:
        raise ShapeError(f"both arguments to matmul need to be at least 1D, but they are {a.dim()}D and {b.dim()}D")
    M, K = (1, a.shape[0]) if a.dim() == 1 else tuple(a.shape[-2:])
    K2, N = (b.shape[0], 1) if b.dim() == 1 else tuple(b.shape[-2:])
    if K != K2:
        raise ShapeError(
            f"mat1 and mat2 shapes cannot be multiplied ({_dims((M, K))} and {_dims((K2, N))}): "
            f"a is {tuple(a.shape)} and b is {tuple(b.shape)} (inner dimensions differ: a's last "
            f"must equal b's {'only' if b.dim() == 1 else 'second-to-last'})"
        )
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
        raise ShapeError(
            f"weight must be a 2-D tensor (out_features, in_features), got {weight.dim()}-D with shape "
            f"{tuple(weight.shape)}"
        )
    if x.shape[-1] != weight.shape[1]:
        rows = prod(x.shape[:-1])
        raise ShapeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{x.shape[-1]} and "
            f"{weight.shape[1]}x{weight.shape[0]}): in_features differ: x is {tuple(x.shape)} and weight "
            f"is {tuple(weight.shape)} (x.shape[-1] must equal weight.shape[1])"
        )
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
    (a0, a1), (b0, b1) = (
        (t.data_ptr(), t.data_ptr() + t.element_size() * (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))))
        for t in (a, b)
    )
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


# --- torch's own words, for the errors and warnings where cupy_ops answers as torch does ------

LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation."


def out_requires_grad(op_name: str) -> RuntimeError:
    """torch's error for an ``out=`` call where an argument requires grad (grad mode on)."""
    return RuntimeError(
        f"{op_name}(): functions with out=... arguments don't support automatic differentiation, but one "
        "of the arguments requires grad."
    )


def broadcast_mismatch(out_shape, shape) -> RuntimeError:
    """torch's error for an in-place call whose result would have another shape than its input."""
    return RuntimeError(f"output with shape {list(out_shape)} doesn't match the broadcast shape {list(shape)}")


def resize_out(out: torch.Tensor, shape) -> None:
    """torch's resize of a wrongly shaped ``out``: silent when it had no elements, else warned."""
    if out.numel() != 0:
        warnings.warn(
            f"An output with one or more elements was resized since it had shape {list(out.shape)}, which "
            f"does not match the required output shape {list(shape)}. This behavior is deprecated, and in a "
            f"future PyTorch release outputs will not be resized unless they have zero elements. You can "
            f"explicitly reuse an out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
            UserWarning,
            stacklevel=5,
        )  # the caller of Op.__call__ (__call__, call_out, _out_impl)
    out.resize_(shape)


# torch's names of its dtypes in its error messages (c10::ScalarType)
SCALAR_TYPE_NAMES = {
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.float32: "Float",
    torch.float64: "Double",
    torch.int64: "Long",
    torch.int32: "Int",
    torch.int16: "Short",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.bool: "Bool",
}


def out_dtype(out: torch.Tensor, result: torch.dtype) -> None:
    """An elementwise op's ``out`` may be of any dtype the result casts to (torch's
    TensorIterator computes in the result's dtype and casts on the store): a float16 result
    into float32 is fine, a float result into an integer ``out`` is torch's RuntimeError."""
    if out.dtype != result and not torch.can_cast(result, out.dtype):
        raise RuntimeError(
            f"result type {SCALAR_TYPE_NAMES.get(result, result)} can't be cast to the desired output type "
            f"{SCALAR_TYPE_NAMES.get(out.dtype, out.dtype)}"
        )


def out(out, x: torch.Tensor, device: int | None, op_name: str, inputs: tuple = (), *, cast: bool = False) -> None:
    """``out=`` (or ``x`` of an in-place form) may receive the result of ``op_name`` on ``x``
    (and the other tensors it reads, ``inputs``), as torch's TensorIterator allows:

    - type, dtype, shape and device (``device``; None: not checked) of ``out`` (``TypeError`` /
      ``ValueError``); with ``cast`` (an elementwise op) any dtype the result casts to
      (``out_dtype``);
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
    if cast:
        out_dtype(out, x.dtype)
    else:
        same_dtype("out", out, "x", x)
    if out.shape != x.shape:
        raise ValueError(f"out must have the shape of x {tuple(x.shape)}, got {tuple(out.shape)}")
    if device is not None:
        same_device("out", out, "x", device)
    if torch.is_grad_enabled():
        if out is x and (x.requires_grad or any(t.requires_grad for t in inputs)):
            if x.requires_grad and x.is_leaf:
                raise RuntimeError(LEAF_IN_PLACE)
            raise RuntimeError(
                f"cupy_ops.ops.{op_name}_ does not record in-place ops in the autograd graph; "
                f"cupy_ops.{op_name}_ does (as torch records them)"
            )
        if out is not x and (out.requires_grad or any(t.requires_grad for t in (x, *inputs))):
            raise out_requires_grad(op_name)
    if not dense(out) and any(sz > 1 and st == 0 for sz, st in zip(out.shape, out.stride())):
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            f"single memory location. {_CLONE}"
        )
    for t in (x, *inputs):
        if _partial_overlap(out, t):
            raise RuntimeError(
                "unsupported operation: some elements of the input tensor and the written-to tensor "
                f"refer to a single memory location. {_CLONE}"
            )


def divisor(d, device: int, *, cuda_ok: bool = True, context: str = "") -> None:
    """``d`` is what torch accepts as the divisor of a CUDA tensor: a real number (an int within
    int64), a 0-dim real CPU tensor, or (when ``cuda_ok``) a one-element real tensor on CUDA
    device ``device``. ``context`` says why a CUDA tensor is refused."""
    if isinstance(d, torch.Tensor):
        if d.numel() != 1:
            raise ValueError(
                f"divisor must be a number or a one-element tensor, got a tensor of shape {tuple(d.shape)}"
            )
        if d.is_complex():
            raise TypeError(f"divisor must be a real number, got a tensor of dtype {d.dtype}")
        if d.is_cuda:
            if not cuda_ok:
                raise ValueError(f"divisor must be a number or a 0-dim CPU tensor{context}, got a CUDA tensor")
            if d.get_device() != device:
                raise ValueError(f"divisor must be on the same device as x (cuda:{device}), got {d.device}")
        elif d.dim() != 0:
            # torch: "Expected all tensors to be on the same device" (only 0-dim CPU tensors mix)
            raise ValueError(
                f"divisor on the CPU must be a 0-dim tensor (as torch requires with a CUDA x), got "
                f"shape {tuple(d.shape)}; use divisor.reshape(()) or move it to x's device"
            )
        return
    if not isinstance(d, (numbers.Real, np.bool_)):  # (a bool is one: torch divides by 0 or 1)
        raise TypeError(f"divisor must be a real number or a one-element tensor, got {type(d).__name__}")
    if isinstance(d, numbers.Integral) and not -(2**63) <= d < 2**63:
        raise ValueError(f"divisor must fit in int64 as torch requires of an int, got {d}")
