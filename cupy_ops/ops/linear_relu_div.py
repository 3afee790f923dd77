"""linear_relu_div: ``torch.relu(F.linear(x, weight, bias)) / divisor`` with bias, ReLU and divide
fused in the GEMM's epilogue, through the GEMM families (ops/gemm/); and ``linear_relu``, the
same without the divide, which the op runs as under autograd."""

from __future__ import annotations

from typing import Optional

import torch

from .. import checks
from ..op import needs_grad, op
from . import divisor as _divisor
from . import gemm
from .linear import linear_grads
from .matmul import batch_entries, matmul
from .relu_backward import relu_backward

_is_compiling = torch.compiler.is_compiling
_Tensor = torch.Tensor


def _output_shape(x, weight, bias, algo) -> tuple:
    return checks.linear_args(x, weight, bias, algo, gemm.ALGOS)


def _output(x, weight, bias, *rest):
    return x.new_empty(_output_shape(x, weight, bias, rest[-1]))


def _fast(x, weight, bias, divisor, algo):
    # the eager hot path (gemm.layer): a signature seen before launches; a number divisor only
    if type(divisor) is not float and type(divisor) is not int:
        return None
    entry = gemm.layer(
        x, weight, bias, gemm.epilogues.BIAS_RELU_SCALE, algo, (), lambda: (_output_shape(x, weight, bias, algo), ())
    )
    if entry is None:
        return None
    epi = gemm.epilogues.builtin_args(0 if bias is None else bias.data_ptr(), _divisor.scale_for(divisor, x.dtype))
    return gemm.run_layer(entry, x, weight, epi)


def _fast_relu(x, weight, bias, algo):
    return _fast(x, weight, bias, 1.0, algo)


def _run(x, weight, bias, divisor, algo, out) -> None:
    # x (*, in): its leading dimensions fold into M (a view where x's strides allow: ops/gemm/batch.py)
    if out.numel():
        if bias is not None and bias.stride(0) != 1:
            bias = bias.contiguous()
        epi = gemm.epilogues.builtin_args(0 if bias is None else bias.data_ptr(), _divisor.scale_for(divisor, x.dtype))
        gemm.matmul_into(x, weight.t(), out, gemm.epilogues.BIAS_RELU_SCALE, algo, epi, weight)


@op("cupy_ops::linear_relu", output=_output, autocast="lower", contiguous=False, check_devices=False, fast=_fast_relu)
def _linear_relu(
    x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], algo: str = "auto", *, out: torch.Tensor
) -> None:
    """``relu(x @ weight.T + bias)``, the Linear output rounded to the dtype before the ReLU."""
    _run(x, weight, bias, 1.0, algo, out)


@op("cupy_ops::linear_relu_div", output=_output, autocast="lower", contiguous=False, check_devices=False, fast=_fast)
def _linear_relu_div(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    divisor: float,
    algo: str = "auto",
    *,
    out: torch.Tensor,
) -> None:
    """``relu(x @ weight.T + bias) / divisor`` (see ``linear_relu_div``)."""
    _run(x, weight, bias, divisor, algo, out)


# r = relu(z), z = x @ w.T + b rounded to the dtype (torch's Linear output); the ReLU mask is
# z's sign, read off r (for the divided op r is computed again: relu(z) / d may have lost it,
# rounded to 0 for tiny z, inf / NaN everywhere for d = 0 / NaN); then linear.linear_grads
def _z_tangent(ctx, tx, tw, tb):
    parts = [
        matmul(tx, ctx.weight.t(), algo=ctx.algo) if tx is not None else None,
        matmul(ctx.x, tw.t(), algo=ctx.algo) if tw is not None else None,
        tb,
    ]
    total = None
    for p in parts:
        if p is not None:
            total = p if total is None else total + p
    if total is tb and tb is not None:  # the bias's tangent alone: one row, for every row of the output
        total = tb.expand(ctx.x.shape[:-1] + tb.shape).contiguous()
    return total


@_linear_relu.backward(save=("x", "weight", "out", "algo"))
def _(ctx, grad):
    return (*linear_grads(ctx, relu_backward(grad, ctx.out)), None)


@_linear_relu.jvp(save=("x", "weight", "out", "algo"))
def _(ctx, tx, tw, tb, t_algo):
    return relu_backward(_z_tangent(ctx, tx, tw, tb), ctx.out)


@_linear_relu_div.backward(save=("x", "weight", "bias", "divisor", "algo"))
def _(ctx, grad):
    r = linear_relu(ctx.x, ctx.weight, ctx.bias, algo=ctx.algo)
    return (*linear_grads(ctx, relu_backward(grad, r, ctx.divisor)), None, None)


@_linear_relu_div.jvp(save=("x", "weight", "bias", "divisor", "algo"))
def _(ctx, tx, tw, tb, t_divisor, t_algo):
    r = linear_relu(ctx.x, ctx.weight, ctx.bias, algo=ctx.algo)
    return relu_backward(_z_tangent(ctx, tx, tw, tb), r, ctx.divisor)


# the vmapped dimension of x alone is one more leading dimension of x (*, in); a vmapped weight
# or bias: one product per batch entry
@_linear_relu.vmap
def _(info, in_dims, x, weight, bias, algo):
    if in_dims[1] is None and in_dims[2] is None:
        return linear_relu(x.movedim(in_dims[0], 0), weight, bias, algo=algo), 0
    return torch.stack([linear_relu(*e, algo=algo) for e in batch_entries(info, in_dims, x, weight, bias)]), 0


@_linear_relu_div.vmap
def _(info, in_dims, x, weight, bias, divisor, algo):
    if in_dims[1] is None and in_dims[2] is None:
        return _linear_relu_div(x.movedim(in_dims[0], 0), weight, bias, divisor, algo), 0
    entries = batch_entries(info, in_dims[:3], x, weight, bias)
    return torch.stack([_linear_relu_div(*e, divisor, algo) for e in entries]), 0


def linear_relu(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *, algo: str = "auto"
) -> torch.Tensor:
    """``torch.relu(F.linear(x, weight, bias))`` in one kernel: ``linear_relu_div`` without the
    divide (arguments, rules and errors the same)."""
    if _is_compiling():
        return _linear_relu(x, weight, bias, algo)
    return _linear_relu.call((x, weight, bias, algo))


def linear_relu_div(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, divisor, *, algo: str = "auto"
) -> torch.Tensor:
    """``torch.relu(F.linear(x, weight, bias)) / divisor`` with bias, ReLU and divide fused in
    the GEMM's epilogue (the Linear output is rounded to the dtype before the ReLU, as torch
    rounds it).

    Differentiable to any order (both modes) with respect to x, weight, bias and a divisor
    tensor: under autograd it runs as ``linear_relu`` (the fused GEMM with bias and ReLU)
    followed by torch's division, which gives the same values, takes the ReLU mask from the
    pre-activation's sign as torch does, and lets torch differentiate the division. Traceable
    by torch.compile (``cupy_ops::linear_relu_div``); ``torch.func.vmap`` (a vmapped ``x`` is one
    more leading dimension; a vmapped weight or bias one product per batch entry). Under
    ``torch.autocast("cuda")`` the operands are cast to the autocast dtype, as torch's
    ``F.linear``, and so is the result.

    Args:
        x: (*, K) CUDA tensor (as ``F.linear``'s input: 1-D, or any number of leading
            dimensions, folded into the GEMM's M: a view where x's strides allow, else a copy),
            float32 / float16 / bfloat16 / float64, any strides.
        weight: (N, K) tensor laid out as ``nn.Linear.weight`` (any strides), same dtype and
            device; a float32 weight ``cupy_ops.prepack``-ed gives fp16x3 its pieces.
        bias: (N,) tensor or None.
        divisor: a real number (Python or numpy; a bool counts as 0 or 1) or a 0-dim CPU
            tensor (0, inf, NaN give what torch gives; never flushed, however large).
        algo: as for ``matmul`` (``"fp16x3"`` scales the rows of ``x`` and of ``weight``;
            ``cupy_ops.gemm_plan(x, weight.T, bias_relu_scale=True)`` says which kernel a call
            takes).
    Returns:
        A contiguous (*, N) tensor of ``x``'s dtype.
    Raises:
        TypeError: a tensor argument is not a tensor or has a wrong dtype (dtypes that differ:
            ``checks.DtypeMismatch``, also a ``RuntimeError`` as torch raises it); divisor not a
            number.
        ValueError: a 0-dim x, a weight not 2-D, K mismatch, a bias not (N,) (``checks.ShapeError``,
            also a ``RuntimeError`` as torch raises it); not on CUDA, devices differ, divisor with
            several elements or on the GPU, ``algo`` unknown or not fitting the dtype, size or GPU.

    Example:
        >>> layer = torch.nn.Linear(64, 32, device="cuda")
        >>> y = cupy_ops.linear_relu_div(torch.randn(8, 64, device="cuda"), layer.weight, layer.bias, 2.0)
    """
    if _is_compiling():
        divisor = _divisor.traced(divisor)
        if isinstance(divisor, _Tensor):
            return _linear_relu(x, weight, bias, algo) / divisor
        return _linear_relu_div(x, weight, bias, divisor, algo)
    if type(divisor) is float:
        # a float is always a valid divisor and the op's call sorts out the rest: ModelNew's
        # forward with grad on (64 x 64) spent ~6 us in the general path's checks (H200)
        if needs_grad((x, weight, bias)):
            return _linear_relu.call((x, weight, bias, algo)) / divisor
        return _linear_relu_div.call((x, weight, bias, divisor, algo))
    # (the tensors are checked by the op's output rule)
    checks.divisor(divisor, -1, cuda_ok=False, context=" for linear_relu_div")
    if needs_grad((x, weight, bias, divisor)):
        return linear_relu(x, weight, bias, algo=algo) / divisor
    divisor = float(divisor.item() if isinstance(divisor, _Tensor) else divisor)
    return _linear_relu_div.call((x, weight, bias, divisor, algo))
