"""linear: ``F.linear(x, weight, bias)`` through the GEMM families with a user's epilogue
(``cupy_ops.epilogue``, CUDA C for one output element) fused at the store: one torch op per
epilogue (``cupy_ops::linear_<name>_<digest>``), its backward from the epilogue's derivative."""

from __future__ import annotations

import inspect
import numbers
from typing import Optional

import torch

from .. import checks
from ..op import Op
from . import gemm
from .gemm.epilogues import LINEAR, Epilogue, args, declare
from .matmul import matmul
from .row_reduce import OPS as _REDUCE_OPS
from .row_reduce import row_reduce

_is_compiling = torch.compiler.is_compiling
_Tensor = torch.Tensor


def epilogue(
    code: str,
    *,
    columns=(),
    rows=(),
    tensors=(),
    scalars=(),
    derivative: str | None = None,
    name: str | None = None,
) -> Epilogue:
    """Declare a GEMM epilogue in CUDA C: what ``cupy_ops.linear(..., epilogue=e)`` applies to
    each output element at the GEMM's store, in every kernel family.

    ``code`` defines ``__device__ acc_t apply(acc_t v, ...)``: its first parameter is the
    Linear's output (``x @ weight.T + bias`` rounded to the dtype, as torch's ``F.linear``
    returns it), the others the declared ones, by name, in any order: a column's ``columns``
    value (a tensor (N,)), a row's ``rows`` value (a tensor of ``x.shape[:-1]``), a ``tensors``
    element at the same (row, column) (a tensor of the output's shape: a residual), and the
    ``scalars`` (Python numbers). All arrive as ``acc_t`` (``float`` for float32, float16 and
    bfloat16; ``double`` for float64); the result is rounded to the dtype at the store.
    ``round_out(x)`` is ``x`` rounded to the dtype as torch rounds each op's result (``x``
    itself in float32 and float64, where it still keeps the compiler from fusing a multiply
    and an add across it): call it where torch would round. The code is pasted into a struct
    template: helper functions beside ``apply`` become its members, constants need ``static
    constexpr``, nothing may sit at file scope (no ``#include``). ``derivative`` defines
    ``__device__ acc_t grad(acc_t v, ...)``, d apply / d v, with apply's parameters in apply's
    order: then the op is differentiable with respect to x, weight and bias (not the
    epilogue's tensors). ``name`` names the torch op. The same arguments give the same object.

    Each (epilogue, kernel) pair compiles on first use and is cached on disk as every kernel;
    ``python -m cupy_ops compile FILE.py`` compiles a file's epilogues offline.

    Raises:
        TypeError: code or derivative not a str.
        ValueError: empty code; a parameter of apply (or grad) not declared, declared twice,
            not taken, a name that is not an ASCII identifier or is taken (linear's arguments,
            the generated code's names: ``epilogues.RESERVED``); more than 6 tensors or 8
            scalars; a ``name`` that is not an identifier.

    Example:
        >>> leaky = cupy_ops.epilogue(r'''
        ... __device__ acc_t apply(acc_t v, acc_t mult, acc_t slope) {
        ...   v = round_out(v * mult); return v > 0 ? v : v * slope; }''', scalars=("mult", "slope"), name="leaky")
        >>> y = cupy_ops.linear(x, layer.weight, layer.bias, epilogue=leaky, mult=2.0, slope=0.1)
    """
    e = declare(code, columns=columns, rows=rows, tensors=tensors, scalars=scalars, derivative=derivative, name=name)
    _op(e)
    return e


IDENTITY = LINEAR  # linear without an epilogue (its op registered on first use: ~10 ms)


def _check_params(e: Epilogue, x, out_shape, values) -> None:
    """The epilogue's tensors and scalars against what it declared (``values`` by name)."""
    rows = out_shape[:-1]
    for kind, names, shape in (
        ("column", e.columns, out_shape[-1:]),
        ("row", e.rows, rows),
        ("tensor", e.tensors, out_shape),
    ):
        for n in names:
            t = values[n]
            checks.tensor(n, t)
            if t.dtype != x.dtype:
                raise checks.DtypeMismatch(f"{n} must have the same dtype as x ({x.dtype}), got {t.dtype}")
            if tuple(t.shape) != tuple(shape):
                raise checks.ShapeError(
                    f"{n} (a {kind} parameter of epilogue {e.name}) must have shape {tuple(shape)}, "
                    f"got {tuple(t.shape)}"
                )
            checks.same_device(n, t, "x", x.get_device())
    for n in e.scalars:
        v = values[n]
        if isinstance(v, (_Tensor, str)) or not isinstance(v, (numbers.Real, torch.SymFloat, torch.SymInt)):
            raise TypeError(f"{n} (a scalar of epilogue {e.name}) must be a real number, got {type(v).__name__}")


def _launch(e: Epilogue, tag: str, x, weight, bias, tensors, scalars, algo, out, dy=None) -> None:
    """``out`` = epilogue(x @ weight.T + bias) (``tag``: the forward's or the gradient's, whose
    ``dy`` is the output's gradient). x (*, K) is folded into rows (a copy where its strides
    do not allow a view): the epilogue's rows and tensors index the folded output."""
    if not out.numel():
        return
    K, N = x.shape[-1], weight.shape[0]
    x2 = x.reshape(-1, K)
    M = x2.shape[0]
    if bias is not None and bias.stride(0) != 1:
        bias = bias.contiguous()
    keep, ptrs, lds = [], [], []
    for n, t in zip(e.pointers, tensors):
        t = t.reshape(M, N) if n in e.tensors else t.reshape(-1)
        if (t.dim() == 2 and t.stride(1) != 1) or (t.dim() == 1 and t.stride(0) != 1):
            t = t.contiguous()
        keep.append(t)
        ptrs.append(t.data_ptr())
        lds.append(t.stride(0) if t.dim() == 2 else 0)
    if dy is not None:
        dy = dy.reshape(M, N)
        dy = dy if dy.stride(1) == 1 else dy.contiguous()
        ptrs.append(dy.data_ptr())
        lds.append(dy.stride(0))
    epi = args(0 if bias is None else bias.data_ptr(), ptrs, lds, [float(s) for s in scalars], M, N)
    gemm.matmul_into(x2, weight.t(), out.view(M, N), tag, algo, epi, weight)


def linear_grads(ctx, dz):
    """The gradients of x (*, in), weight and bias (those ``ctx.needs_grad``) from ``dz``, the
    gradient of the Linear's output (*, out): x folded to rows for the weight's and bias's."""
    (n, k), rows = ctx.weight.shape, checks.prod(ctx.x.shape[:-1])
    dx = matmul(dz, ctx.weight, algo=ctx.algo) if ctx.needs_grad("x") else None
    dw = matmul(dz.reshape(rows, n).t(), ctx.x.reshape(rows, k), algo=ctx.algo) if ctx.needs_grad("weight") else None
    db = dz.reshape(rows, n).sum(0) if ctx.needs_grad("bias") else None
    return dx, dw, db


_ops: dict[str, Op] = {}


def _op(e: Epilogue) -> Op:
    """The torch op of epilogue ``e`` (declared on first request): ``(x, weight, bias, <its
    tensors and scalars in declaration order>, algo) -> Tensor``, and its gradient op."""
    op = _ops.get(e.tag)
    if op is not None:
        return op
    names = e.pointers + e.scalars
    params = [
        inspect.Parameter("x", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor),
        inspect.Parameter("weight", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor),
        inspect.Parameter("bias", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Optional[torch.Tensor]),
    ]
    params += [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor) for n in e.pointers
    ]
    params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=float) for n in e.scalars]
    algo = inspect.Parameter("algo", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str, default="auto")
    out = inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation=torch.Tensor)
    npt, nsc = len(e.pointers), len(e.scalars)

    def shape_of(x, weight, bias, rest):
        shape = checks.linear_args(x, weight, bias, rest[-1], gemm.ALGOS)
        _check_params(e, x, shape, dict(zip(names, rest)))
        return shape

    def output(x, weight, bias, *rest):
        return x.new_empty(shape_of(x, weight, bias, rest))

    def checked(x, weight, bias, rest):
        # gemm.layer's check: the shape, and the row strides of the epilogue's tensors where
        # each is contiguous (a view of the folded output's shape), else the general path
        shape = shape_of(x, weight, bias, rest)
        if not all(t.is_contiguous() for t in rest[:npt]):
            return shape, None
        return shape, tuple(shape[-1] if n in e.tensors else 0 for n in e.pointers)

    def fast(x, weight, bias, *rest):
        # the eager hot path: a signature seen before packs the epilogue's arguments and launches
        scalars = rest[npt : npt + nsc]
        for v in scalars:
            if type(v) is not float and type(v) is not int:
                return None
        tensors = rest[:npt]
        try:
            extra = tuple([(t.shape, t.stride(), t.dtype, t.get_device(), t.is_cuda) for t in tensors]) if npt else ()
        except RuntimeError:  # a tensor without strides (sparse): the general path names it
            return None
        entry = gemm.layer(x, weight, bias, e.tag, rest[-1], extra, lambda: checked(x, weight, bias, rest))
        if entry is None:
            return None
        ptrs = [t.data_ptr() for t in tensors]
        epi = args(
            0 if bias is None else bias.data_ptr(), ptrs, entry[5], [float(v) for v in scalars], entry[2], entry[0][-1]
        )
        return gemm.run_layer(entry, x, weight, epi)

    def make(tag: str, grad: bool) -> Op:
        def launch(x, weight, bias, *rest, out):
            dy = rest[-2] if grad else None
            _launch(e, tag, x, weight, bias, rest[:npt], rest[npt : npt + nsc], rest[-1], out, dy)

        ps = params + (
            [inspect.Parameter("dy", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=torch.Tensor)] if grad else []
        )
        launch.__signature__ = inspect.Signature([*ps, algo, out], return_annotation=None)
        launch.__annotations__ = {p.name: p.annotation for p in [*ps, algo, out]}
        launch.__doc__ = f"linear with epilogue {e.name}" + (" (its gradient: dy * grad(v, ...))" if grad else "")
        launch.__module__ = __name__
        # (shapes checked by the output rule; the launcher folds x and makes what it reads row-major)
        return Op(
            f"cupy_ops::linear_{e.name}_{e.tag[-12:]}{'_grad' if grad else ''}",
            launch,
            output=output,
            autocast="lower",
            contiguous=False,
            check_devices=False,
            fast=None if grad else fast,
        )

    op = _ops[e.tag] = make(e.tag, False)
    grad_op = make(e.grad_tag, True) if e.derivative is not None else None
    saved = ("x", "weight", "bias", *names, "algo")

    @op.backward(save=saved)
    def _(ctx, g):
        if e is IDENTITY:  # F.linear's own: the Linear's output gradient is g, no GEMM for it
            return (*linear_grads(ctx, g), None)
        if grad_op is None:
            raise NotImplementedError(
                f"epilogue {e.name} has no derivative: pass derivative= (CUDA C defining grad(v, ...), "
                f"d apply / d v) to cupy_ops.epilogue to differentiate cupy_ops.linear through it"
            )
        held = [getattr(ctx, n) for n in names]
        for n in e.pointers:
            if ctx.needs_grad(n):
                raise NotImplementedError(
                    f"cupy_ops.linear with epilogue {e.name}: no gradient with respect to its tensor {n!r} "
                    f"(the derivative is with respect to the Linear's output only)"
                )
        dz = grad_op(ctx.x, ctx.weight, ctx.bias, *held, g.contiguous(), ctx.algo)
        return (*linear_grads(ctx, dz), *([None] * len(names)), None)

    return op


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    epilogue: Epilogue | None = None,
    algo: str = "auto",
    reduce: str | None = None,
    **params,
) -> torch.Tensor:
    """``epilogue(F.linear(x, weight, bias))`` in one GEMM: the epilogue (``cupy_ops.epilogue``)
    applied to each output element at the store; ``F.linear`` itself without one. ``reduce``:
    then the output's rows reduced (``cupy_ops.row_reduce``: one more pass over the output).

    Args:
        x: (*, K) CUDA tensor, float32 / float16 / bfloat16 / float64, any strides (its leading
            dimensions fold into the GEMM's rows: a view where its strides allow, else a copy).
        weight: (N, K), as ``nn.Linear.weight``, same dtype and device; a float32 weight
            ``cupy_ops.prepack``-ed gives fp16x3 its pieces (docs/prepack.md).
        bias: (N,) or None.
        epilogue: a declared ``Epilogue``, or None.
        algo: as for ``matmul`` (``"accurate"``: fp32 at fp32's accuracy, faster than torch).
        reduce: None, or ``"sum"``, ``"mean"``, ``"amax"``, ``"amin"``, ``"logsumexp"``
            (the result ``(*,)``: ``y.<reduce>(-1)``) or ``"softmax"`` (``y.softmax(-1)``).
        **params: the epilogue's tensors (columns (N,), rows ``x.shape[:-1]``, tensors
            (*, N): exactly these shapes, no broadcasting; x's dtype and device) and scalars
            (Python or numpy real numbers; not tensors), by name.
    Returns:
        A contiguous (*, N) tensor of x's dtype (``reduce``: see above). Under ``torch.autocast("cuda")`` every floating
        tensor, the epilogue's too, is cast to the autocast dtype (torch would keep a float32
        residual added after an autocast ``F.linear`` in float32), and so is the result.
    Raises:
        TypeError: a wrong tensor dtype or argument type, an unknown or missing parameter.
        ValueError: shapes that do not fit (``checks.ShapeError``), not on CUDA, devices differ,
            ``algo`` or ``reduce`` unknown, ``algo`` not fitting.
        NotImplementedError: backward through an epilogue declared without ``derivative``.

    Example:
        >>> y = cupy_ops.linear(x, layer.weight, layer.bias, epilogue=leaky, mult=2.0, slope=0.1)
    """
    if epilogue is None:
        epilogue = IDENTITY
    elif not isinstance(epilogue, Epilogue):
        raise TypeError(f"epilogue must be a cupy_ops.epilogue(...) declaration or None, got {type(epilogue).__name__}")
    names = epilogue.pointers + epilogue.scalars
    unknown = sorted(set(params) - set(names))
    missing = [n for n in names if n not in params]
    if unknown and epilogue is IDENTITY:
        raise TypeError(
            f"linear() got unexpected keyword argument(s) {', '.join(unknown)} (the bias is bias=; other "
            f"keywords are an epilogue's parameters, and there is no epilogue)"
        )
    if unknown or missing:
        raise TypeError(
            f"epilogue {epilogue.name} takes {', '.join(names) or 'no parameters'}"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            + (f"; missing: {', '.join(missing)}" if missing else "")
        )
    if reduce is not None and (not isinstance(reduce, str) or reduce not in _REDUCE_OPS):
        raise ValueError(f"reduce must be None or one of {', '.join(_REDUCE_OPS)}, got {reduce!r}")
    op = _op(epilogue)
    call = (x, weight, bias, *(params[n] for n in names), algo)
    if _is_compiling():
        y = op(*call)
        return y if reduce is None else _REDUCE_OPS[reduce](y)
    y = op.call(call)
    return y if reduce is None else row_reduce(y, reduce)
