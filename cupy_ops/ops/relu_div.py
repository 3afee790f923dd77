"""relu_div: ``torch.relu(x) / divisor`` fused in one pass (cuda_src/relu_div.cu), for every
divisor kind torch takes, with its in-place form."""

from __future__ import annotations

import torch

from .. import checks
from ..op import bump_version, needs_grad, op, plain_eager
from . import divisor as _divisor
from .elementwise import Elementwise, elementwise_vmap
from .relu import relu, relu_
from .relu_backward import relu_backward

# extra kernel arguments: scale (in the compute type), pointer to a GPU divisor or null
KERNEL = Elementwise("relu_div.cu", "relu_div")
_is_compiling = torch.compiler.is_compiling
_Tensor = torch.Tensor


def _output(x, divisor):
    checks.cuda_tensor("x", x)
    return torch.empty_like(x)


@op(
    "cupy_ops::relu_div",
    output=_output,
    inplace="x",
    contiguous=False,
    any_out_layout=True,
    elementwise=True,
    cast_out=True,
    check_devices=False,
)
def _relu_div(x: torch.Tensor, divisor: float, *, out: torch.Tensor) -> None:
    KERNEL.write(x, out, (_divisor.scale_for(divisor, x.dtype), 0))


# torch's for relu(x) / d: threshold_backward(grad / d, x, 0), grad / d by torch's reciprocal rule
@_relu_div.backward(save=("x", "divisor"))
def _(ctx, grad):
    return relu_backward(grad, ctx.x, ctx.divisor), None


@_relu_div.jvp(save=("x", "divisor"))
def _(ctx, t, t_divisor):
    return relu_backward(t, ctx.x, ctx.divisor)


_relu_div.vmap(elementwise_vmap(_relu_div))


def _number(divisor):
    """A checked number divisor as the float torch divides by (ints within int64, bools)."""
    checks.divisor(divisor, -1)
    return float(divisor)


def relu_div(x: torch.Tensor, divisor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x) / divisor`` in one kernel, bit for bit as torch computes it.

    Differentiable to any order (both modes) with respect to ``x`` and a divisor tensor (under
    autograd a divisor tensor is applied as ``cupy_ops.relu(x) / divisor``: torch's division and
    its gradient); ``torch.func.vmap``; traceable by torch.compile with any divisor kind;
    under autocast it runs in x's dtype, as torch's.

    Args:
        x: CUDA tensor of any shape, float32 / float16 / bfloat16 / float64, any strides.
        divisor: a real number (Python or numpy; a bool counts as 0 or 1, as in torch), a 0-dim
            CPU tensor, or a one-element CUDA tensor on ``x``'s device. 0, inf and NaN give
            what torch gives (e.g. ``relu(x) / 0``). A number or CPU tensor is applied as torch
            does, by multiplying with its reciprocal (taken in double, rounded to the compute
            type, never flushed); a CUDA tensor divides truly (no host sync).
        out: optional tensor of the result's dtype and device to write into.
    Returns:
        A tensor of ``x``'s shape and dtype (``out`` when given) -- or, as torch gives it, of
        ``torch.result_type(x, divisor)`` and the broadcast shape when a divisor tensor promotes
        the dtype (a 0-dim ``x``, or a CUDA divisor with dimensions) or has more dimensions.
    Raises:
        TypeError: ``x``/``out`` not a tensor or of a wrong dtype; ``divisor`` not a real number.
        ValueError: ``x`` not on CUDA; ``out`` on another device; ``divisor`` with several
            elements, on another GPU, a CPU tensor with dimensions, an int past int64.
        RuntimeError: as torch: ``out`` partially overlaps ``x`` or the divisor, or repeats
            elements; ``out=`` with an input that requires grad (grad mode on).

    Example:
        >>> y = cupy_ops.relu_div(torch.randn(4096, device="cuda"), 2.0)
    """
    if type(divisor) is float and out is None and not _is_compiling():
        return _relu_div.call((x, divisor))
    if _is_compiling():
        divisor = _divisor.traced(divisor)
    if isinstance(divisor, _Tensor):
        return _tensor_divisor(x, divisor, out)
    return _relu_div(x, divisor if _is_compiling() else _number(divisor), out=out)


def _tensor_divisor(x, d, out):
    """relu(x) / d for a divisor tensor: fused (true division by a GPU divisor, torch's
    reciprocal of a CPU one) where nothing is recorded, else torch's division of our relu."""
    if _is_compiling() or not plain_eager((x, d, out)) or needs_grad((x, d, out)):
        return relu(x) / d if out is None else torch.div(relu(x), d, out=out)
    device = checks.cuda_tensor("x", x)
    checks.divisor(d, device)
    dtype, shape = _divisor.result(x, d)
    if dtype != x.dtype or shape != x.shape or (out is not None and out.dtype != dtype):
        # torch computes in the promoted dtype, broadcasts, and casts into a wider out: so do
        # we (a rare path)
        y = _run(x.to(dtype), None, d).reshape(shape)
        if out is None:
            return y
        checks.out(out, y, device, "relu_div", (x, d), cast=True)
        return out.copy_(y)
    return _run(x, out, d)


def _run(x, out, d):
    """The fused kernel with a divisor tensor ``d``, into ``out`` (checked here) or a new tensor."""
    scale, on_device = _divisor.parse(d, x)
    extra = (scale, 0 if on_device is None else on_device.data_ptr())
    if out is None:
        y = _output(x, d)
        KERNEL.write(x, y, extra)
        return y
    checks.out(out, x, x.get_device(), "relu_div", (d,))
    KERNEL.write(x, out, extra)
    bump_version(out)
    return out  # on_device stays referenced until the launch is queued


def relu_div_(x: torch.Tensor, divisor) -> torch.Tensor:
    """In-place ``relu_div``: overwrites and returns ``x``. When ``x`` (not a leaf) or the
    divisor requires grad, autograd records it (an in-place ReLU, then torch's ``div_``) with
    the gradients of ``torch.relu(x) / divisor``; a leaf that requires grad raises torch's
    RuntimeError.

    Args:
        x: as for ``relu``, overwritten.
        divisor: as for ``relu_div``; a divisor tensor that promotes the dtype is applied in
            the promoted dtype and the result cast back to ``x``'s, as torch's ``div_`` does.
    Returns:
        ``x``.
    Raises:
        the errors of ``relu_div``; RuntimeError also when a divisor tensor would broadcast
        ``x`` to more dimensions, or a GPU divisor lies inside ``x`` (torch's partial overlap).

    Example:
        >>> x = torch.randn(1024, device="cuda"); cupy_ops.relu_div_(x, 2.0)
    """
    if _is_compiling():
        divisor = _divisor.traced(divisor)
    if not isinstance(divisor, _Tensor):
        return _relu_div.call_inplace((x, divisor if _is_compiling() else _number(divisor)))
    if _is_compiling() or not plain_eager((x, divisor)) or needs_grad((x, divisor)):
        if torch.is_grad_enabled() and x.requires_grad and x.is_leaf:
            raise RuntimeError(checks.LEAF_IN_PLACE)
        return relu_(x).div_(divisor)
    device = checks.cuda_tensor("x", x)
    checks.divisor(divisor, device)
    dtype, shape = _divisor.result(x, divisor)
    if shape != x.shape:
        raise checks.broadcast_mismatch(x.shape, shape)
    if dtype != x.dtype:
        checks.out(x, x, device, "relu_div", (divisor,))
        return x.copy_(_run(x.to(dtype), None, divisor))
    return _run(x, x, divisor)
