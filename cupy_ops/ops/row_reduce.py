"""Row reductions: ``x.sum(-1)``, ``x.mean(-1)``, ``x.amax(-1)``, ``x.amin(-1)``,
``x.logsumexp(-1)`` and ``x.softmax(-1)`` (cuda_src/row_reduce.cu), each a torch op
(``cupy_ops::row_<name>``), and what ``cupy_ops.linear(..., reduce=)`` applies after the epilogue.

One pass over the input, a block a row (softmax and logsumexp read the row again from L2 for
their sums; softmax writes it), a warp per RR_COLS_PER_WARP columns up to RR_MAX_THREADS threads:
a short row takes one warp, not a block of idle ones (docs/epilogues.md#row-reductions).
"""

from __future__ import annotations

import torch

from .. import checks, launch
from ..device import GRID_MAX
from ..dtypes import CUDA_NAMES
from ..kernel import Kernel
from ..op import op
from .elementwise import elementwise_vmap

RR_MAX_THREADS = 256
RR_COLS_PER_WARP = 1024  # 32 a thread
RR_UNROLL = 4  # 16-byte loads in flight a thread
RR_MAX_COLS = 2**31 - 1  # the kernel's n is an int
# name -> (kernel code, torch's CUDA autocast policy for it: softmax, sum and logsumexp run in fp32)
REDUCTIONS = {
    "sum": (0, "fp32"),
    "mean": (1, None),
    "amax": (2, None),
    "amin": (3, None),
    "logsumexp": (4, "fp32"),
    "softmax": (5, "fp32"),
}
KERNEL = Kernel.builtin(
    "row_reduce.cu",
    "row_reduce",
    {(dt, name): f"row_reduce<{c}, {code}>" for name, (code, _) in REDUCTIONS.items() for dt, c in CUDA_NAMES.items()},
    defines={"RR_MAX_THREADS": RR_MAX_THREADS, "RR_UNROLL": RR_UNROLL},
)


def threads_for(n: int) -> int:
    """Threads of a row's block: a warp per RR_COLS_PER_WARP columns, whole warps, at most RR_MAX_THREADS."""
    return 32 * max(1, min(RR_MAX_THREADS // 32, -(-n // RR_COLS_PER_WARP)))


def _reduce_into(name: str, x: torch.Tensor, out: torch.Tensor) -> None:
    n = x.shape[-1] if x.dim() else 1
    rows = x.numel() // n if n else 0
    if rows == 0:
        if out.numel():  # rows of no columns: torch's value of an empty reduction
            out.fill_(0.0 if name == "sum" else float("nan") if name == "mean" else -float("inf"))
        return
    h = KERNEL.handle((x.dtype, name), x.get_device())
    launch.launch(h, (min(rows, GRID_MAX[0]), 1, 1), (threads_for(n), 1, 1), (x.data_ptr(), out.data_ptr(), rows, n))


def _declare(name: str):
    policy = REDUCTIONS[name][1]
    keeps = name == "softmax"

    def output(x):
        checks.cuda_tensor("x", x)
        if x.dim() and x.shape[-1] > RR_MAX_COLS:
            raise ValueError(f"row_{name}: rows of at most {RR_MAX_COLS} elements, got {x.shape[-1]}")
        if not keeps and x.dim() and x.shape[-1] == 0 and name in ("amax", "amin"):
            raise IndexError(f"{name}(): Expected reduction dim -1 to have non-zero size.")
        return torch.empty_like(x, memory_format=torch.contiguous_format) if keeps else x.new_empty(x.shape[:-1])

    def launcher(x: torch.Tensor, *, out: torch.Tensor) -> None:
        _reduce_into(name, x, out)

    launcher.__doc__ = f"``x.{name}(-1)`` (a row reduction)"
    return op(f"cupy_ops::row_{name}", output=output, autocast=policy)(launcher)


OPS = {name: _declare(name) for name in REDUCTIONS}


def _expand(g, x):
    return g.unsqueeze(-1).expand(x.shape) if x.dim() else g


# The backward and forward-AD rules are torch's formulas in torch ops (differentiable again).
@OPS["sum"].backward(save=("x",))
def _(ctx, g):
    return _expand(g, ctx.x)


@OPS["sum"].jvp(save=("x",))
def _(ctx, t):
    return OPS["sum"](t)


@OPS["mean"].backward(save=("x",))
def _(ctx, g):
    return _expand(g, ctx.x) / (ctx.x.shape[-1] if ctx.x.dim() else 1)


@OPS["mean"].jvp(save=("x",))
def _(ctx, t):
    return OPS["mean"](t)


def _extremum_rules(name):
    # torch's amax / amin: the gradient shared evenly by the elements equal to the result
    def mask(ctx):
        return ctx.x == (ctx.out.unsqueeze(-1) if ctx.x.dim() else ctx.out)

    @OPS[name].backward(save=("x", "out"))
    def _(ctx, g):
        m = mask(ctx)
        return _expand(g, ctx.x) / m.sum(-1, keepdim=True) * m if ctx.x.dim() else g * m

    @OPS[name].jvp(save=("x", "out"))
    def _(ctx, t):
        m = mask(ctx)
        return (t * m).sum(-1) / m.sum(-1)


_extremum_rules("amax")
_extremum_rules("amin")


@OPS["logsumexp"].backward(save=("x", "out"))
def _(ctx, g):
    return _expand(g, ctx.x) * (ctx.x - _expand(ctx.out, ctx.x)).exp()


@OPS["logsumexp"].jvp(save=("x", "out"))
def _(ctx, t):
    return (t * (ctx.x - _expand(ctx.out, ctx.x)).exp()).sum(-1)


@OPS["softmax"].backward(save=("out",))
def _(ctx, g):
    y = ctx.out
    return y * (g - (g * y).sum(-1, keepdim=True))


@OPS["softmax"].jvp(save=("out",))
def _(ctx, t):
    y = ctx.out
    return y * (t - (t * y).sum(-1, keepdim=True))


for _op in OPS.values():
    _op.vmap(elementwise_vmap(_op))


def row_reduce(x: torch.Tensor, how: str) -> torch.Tensor:
    """``x``'s last dimension reduced as torch reduces it: ``how`` is ``"sum"``, ``"mean"``,
    ``"amax"``, ``"amin"``, ``"logsumexp"`` (``x.<how>(-1)``: shape ``x.shape[:-1]``) or
    ``"softmax"`` (``x.softmax(-1)``: ``x``'s shape, contiguous).

    One kernel, a block a row; sums in float64 for float32 and float64 rows (rounded once), in
    float32 for 16-bit ones, in another order than torch's: within torch's own error against
    float64 (float32 rows: below it), not its bits (amax and amin are exact).
    NaN and infinities give what torch gives. Differentiable to any order (both modes), traceable
    by torch.compile (``cupy_ops::row_<how>``), ``torch.func.vmap``; under autocast softmax, sum
    and logsumexp run in float32 as torch's do, mean, amax and amin in x's dtype.

    Args:
        x: CUDA tensor of any shape (0-dim: one element), float32 / float16 / bfloat16 / float64,
            any strides (copied contiguous first where they are not).
        how: the reduction's name.
    Returns:
        A tensor of x's dtype.
    Raises:
        TypeError: x not a tensor or of another dtype; ``how`` not a str.
        ValueError: x not on CUDA; ``how`` unknown; rows of more than 2^31 - 1 elements.
        IndexError: amax / amin of rows of no elements (torch's).

    Example:
        >>> p = cupy_ops.row_reduce(torch.randn(8, 1000, device="cuda"), "softmax")
    """
    r = OPS.get(how) if isinstance(how, str) else None
    if r is None:
        if not isinstance(how, str):
            raise TypeError(f"how must be a str, one of {', '.join(REDUCTIONS)}; got {type(how).__name__}")
        raise ValueError(f"how must be one of {', '.join(REDUCTIONS)}, got {how!r}")
    if torch.compiler.is_compiling():
        return r(x)
    return r.call((x,))
