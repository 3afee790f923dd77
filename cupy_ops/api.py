"""Public API: ``cupy_ops.relu``, ``relu_div``, ``matmul``, ``linear_relu_div`` (and in-place forms).

A plain eager call goes straight to the op's launcher (cupy_ops/ops): a few microseconds of
host time. When autograd has to record the call (an input requires grad and grad mode is
on) or torch.compile is tracing, the call goes through the ``cupy_ops::*`` custom ops
instead (cupy_ops/torch_ops.py), which carry the fake implementations and the backward.
The docstrings of the launchers in ``cupy_ops.ops`` list shapes, dtypes and errors; the
arguments are checked there (``checks``). Under autograd, a divisor *tensor* and in-place calls
on tensors autograd tracks are computed as the torch expression they stand for, with our ReLU
and torch's division, so torch's autograd gives every gradient (the divisor's included) and
the values stay torch's bit for bit.
"""
from __future__ import annotations

import torch

from . import checks, ops, torch_ops
from .ops import divisor as _divisor
from .ops import gemm as _gemm
from .ops.gemm_plan import ALGOS, GemmPlan
from .ops.relu import KERNEL as _RELU
from .ops.relu_div import KERNEL as _RELU_DIV

_is_compiling = torch.compiler.is_compiling
_scale_for = _divisor.scale_for
_relu_fast = _RELU.fast
_relu_div_fast = _RELU_DIV.fast


def _needs_grad(*tensors) -> bool:
    """Grad mode is on and one of ``tensors`` requires grad: autograd must record the call."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _record(*tensors) -> bool:
    """True when this call must go through the custom op (autograd or torch.compile)."""
    return _is_compiling() or _needs_grad(*tensors)


def _tracked_in_place(x, divisor=None) -> bool:
    """An in-place call autograd must record: x is not a leaf that requires grad (torch's
    error for those comes from ops) and x or the divisor requires grad, grad mode on."""
    if not torch.is_grad_enabled() or not isinstance(x, torch.Tensor) or (x.requires_grad and x.is_leaf):
        return False
    return x.requires_grad or (isinstance(divisor, torch.Tensor) and divisor.requires_grad)


def relu(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x)``, bit for bit: NaN stays NaN, -0.0 and negatives give +0.0.

    Differentiable to any order; traceable by torch.compile as ``cupy_ops::relu`` (when ``out``
    is None).

    Example:
        >>> y = cupy_ops.relu(torch.randn(1024, device="cuda"))
    """
    if out is None:
        y = _relu_fast(x, ())
        if y is not None:
            return y
        if _record(x):
            return torch_ops.relu(x)
    return ops.relu(x, out=out)


def relu_(x: torch.Tensor) -> torch.Tensor:
    """In-place ``relu``: overwrites and returns ``x``, bumping its version counter as torch's
    ``relu_`` does. On a tensor autograd tracks (a non-leaf that requires grad) the call is
    recorded, as torch records ``x.relu_()``; on a leaf that requires grad it raises torch's
    RuntimeError.

    Args:
        x: CUDA tensor of any shape, float32 / float16 / bfloat16 / float64, any strides
            (a view with gaps is gathered and written back).
    Returns:
        ``x``.
    Raises:
        TypeError: ``x`` is not a tensor of a supported dtype. ValueError: not on CUDA.
        RuntimeError: ``x`` repeats elements (a broadcast view), or is a leaf that requires grad.

    Example:
        >>> x = torch.randn(1024, device="cuda"); cupy_ops.relu_(x)
    """
    if _tracked_in_place(x):
        return x.copy_(torch_ops.relu(x))   # relu saves its output, not x: x may be overwritten
    return ops.relu_(x)


def relu_div(x: torch.Tensor, divisor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.relu(x) / divisor`` in one pass, bit for bit for every divisor kind torch takes.

    Differentiable to any order with respect to ``x`` and a divisor tensor (whose gradient is
    torch's: under autograd a divisor tensor is applied as ``cupy_ops.relu(x) / divisor``);
    traceable by torch.compile (when ``out`` is None).

    Example:
        >>> y = cupy_ops.relu_div(torch.randn(1024, device="cuda"), 2.0)
    """
    if out is None and type(divisor) is float and type(x) is torch.Tensor:
        y = _relu_div_fast(x, (_scale_for(divisor, x.dtype), 0))
        if y is not None:
            return y
    if out is None and _record(x, divisor):
        if isinstance(divisor, torch.Tensor):
            checks.divisor(divisor, checks.cuda_tensor("x", x))
            return torch_ops.relu(x) / divisor
        checks.divisor(divisor, -1)
        return torch_ops.relu_div(x, float(divisor))
    return ops.relu_div(x, divisor, out=out)


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
    if _tracked_in_place(x, divisor):
        checks.divisor(divisor, checks.cuda_tensor("x", x))
        return relu_(x).div_(divisor)
    return ops.relu_div_(x, divisor)


def matmul(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto") -> torch.Tensor:
    """``a @ b`` for 2-D CUDA tensors, accumulated in fp32 (fp64 for float64).

    Differentiable to any order; traceable by torch.compile as ``cupy_ops::matmul``.

    Example:
        >>> a, b = torch.randn(64, 32, device="cuda"), torch.randn(32, 16, device="cuda")
        >>> c = cupy_ops.matmul(a, b)                 # algo="auto": follows torch's TF32 switch
        >>> print(cupy_ops.gemm_plan(a, b))           # which kernel that call took
    """
    if _record(a, b):
        return torch_ops.matmul(a, b, algo)
    return ops.matmul(a, b, algo=algo)


def linear_relu_div(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, divisor,
                    *, algo: str = "auto") -> torch.Tensor:
    """``torch.relu(F.linear(x, weight, bias)) / divisor`` with bias, ReLU and divide fused in
    the GEMM's epilogue (the Linear output is rounded to the dtype before the ReLU, as torch
    rounds it).

    Differentiable to any order with respect to x, weight, bias and a divisor tensor: under
    autograd it runs as ``cupy_ops::linear_relu`` (the fused GEMM with bias and ReLU) followed
    by torch's division, which gives the same values, takes the ReLU mask from the
    pre-activation's sign as torch does, and lets torch differentiate the division. Traceable
    by torch.compile.

    Example:
        >>> layer = torch.nn.Linear(64, 32, device="cuda")
        >>> y = cupy_ops.linear_relu_div(torch.randn(8, 64, device="cuda"), layer.weight, layer.bias, 2.0)
    """
    if _record(x, weight, bias, divisor):
        device = checks.linear_args(x, weight, bias, algo, ALGOS)
        checks.divisor(divisor, device, cuda_ok=False, context=" for linear_relu_div")
        if _needs_grad(x, weight, bias, divisor):
            return torch_ops.linear_relu(x, weight, bias, algo) / divisor
        return torch_ops.linear_relu_div(x, weight, bias, float(divisor), algo)
    return ops.linear_relu_div(x, weight, bias, divisor, algo=algo)


def gemm_plan(a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto", bias_relu_scale: bool = False) -> GemmPlan:
    """Which kernel ``matmul(a, b, algo=algo)`` takes, and how: the kernel family and
    instantiation, tile, split-K, grid and what is done to each operand (read in place,
    copied, transposed). For ``linear_relu_div(x, weight, ...)`` pass ``(x, weight.T)`` and
    ``bias_relu_scale=True``. ``print(plan)`` gives one readable line.

    Args:
        a, b: as for ``matmul``.
        algo: as for ``matmul``.
        bias_relu_scale: plan the fused epilogue of ``linear_relu_div``.
    Returns:
        A ``GemmPlan`` (a frozen dataclass; ``str()`` of it is the readable line).
    Raises:
        TypeError, ValueError: those of ``matmul`` for bad arguments; ``ValueError`` when M or
        N is 0 (no kernel runs).

    Example:
        >>> a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        >>> print(cupy_ops.gemm_plan(a, a))   # on an H100: "wgmma: gemm_wgmma<bf16, ...>, tile ..., grid ...; ..."
    """
    return _gemm.explain(a, b, algo, bias_relu_scale)


# --- docstrings --------------------------------------------------------------------------
# The launchers in cupy_ops.ops hold each op's Args / Returns / Raises, next to the checks
# they describe; the public functions show them too (help(cupy_ops.relu_div) is complete).

def _with_launcher_sections(public, launcher) -> None:
    doc, ldoc = public.__doc__, launcher.__doc__ or ""
    start = ldoc.find("    Args:")
    if start < 0:
        return
    end = ldoc.find("    Example:", start)
    sections = ldoc[start:end if end >= 0 else len(ldoc)].rstrip() + "\n\n"
    cut = doc.find("    Example:")
    public.__doc__ = doc[:cut] + sections + doc[cut:] if cut >= 0 else doc.rstrip() + "\n\n" + sections


for _public, _launcher in ((relu, ops.relu), (relu_div, ops.relu_div), (matmul, ops.matmul),
                           (linear_relu_div, ops.linear_relu_div)):
    _with_launcher_sections(_public, _launcher)
