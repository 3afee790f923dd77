"""torch.matmul's shapes on the GEMM plans: 1-D operands, batch dimensions, broadcasting.

A product ``a (*A, M, K) @ b (*B, K, N)`` (a 1-D ``a`` a row, a 1-D ``b`` a column) is carried
out in one of these ways, chosen here (``batch_plan``) and nowhere else:

- ``"2-D"``: no batch: one GEMM.
- ``"folded"``: ``b`` has no batch (or only batch dimensions of size 1): ``a``'s batch
  dimensions fold into M, one GEMM of ``prod(A) * M`` rows; a view of ``a`` when its strides
  allow (``a.reshape(-1, K)`` is a view), else ``a`` is copied first (``"folded, a copied"``),
  as torch's own matmul copies it. linear_relu_div's ``x (*, in)`` always takes this route.
- ``"batched"``: both operands batched (or a 2-D ``a`` with a batched ``b``), and the family
  has a batched kernel that takes the operands (its ``batched``): the batch in the grid, one
  stride per operand (0: broadcast, never copied). The batch dimensions that collapse into
  one stride for both operands make one launch; any outer ones (a broadcast that does not
  collapse, e.g. (1, 3) against (2, 1)) a launch each.
- ``"loop"``: the same where the family has no batched kernel (or cannot take the operands):
  one 2-D GEMM per batch entry, each on views; the interim for those families.

Families with a batched kernel: ``naive``, ``simt``, ``tc`` and ``wgmma`` (16-bit, and TF32: a small
entries with a row-major b copied K-major once; the batch in its tile walk, not the grid's z);
``tf32x3`` and ``fp16x3`` loop. Pure except ``run``: ``batch_plan`` reads shapes and strides
only."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from ...checks import broadcast_batch, prod
from .common import GemmPlan
from .epilogues import NO_ARGS
from .planner import launcher_for, plan_for
from .planner import run as run_plan

MODES = ("2-D", "folded", "folded, a copied", "batched", "loop")


@dataclass(frozen=True)
class BatchPlan:
    """How a batched / broadcast product reaches the GEMMs (see the module's docstring): ``mode``
    (one of ``MODES``), ``launches`` (GEMMs run: 2-D, or batched ones), ``batch_shape`` (the
    broadcast batch shape) and ``gemm``, the plan of the first (None where the output is empty;
    ``gemm.batch`` > 0: a batched kernel's). Every field of ``gemm`` reads through
    (``plan.family``, ``plan.kernel``, ...)."""

    mode: str
    launches: int
    batch_shape: tuple
    gemm: GemmPlan | None

    def __getattr__(self, name):
        if name.startswith("__") or name == "gemm":
            raise AttributeError(name)
        return getattr(self.gemm, name)

    def __str__(self) -> str:
        how = {
            "2-D": "",
            "folded": "batch folded into M (a view); ",
            "folded, a copied": "batch folded into M (a copied first: its strides do not fold); ",
            "batched": f"the batch in the grid ({self.launches} launch{'es' if self.launches > 1 else ''}); ",
            "loop": f"one 2-D GEMM per batch entry ({self.launches} launches; no batched kernel for the "
            f"family or these operands); ",
        }[self.mode]
        return f"batch {self.batch_shape}: {how}{self.gemm if self.gemm is not None else 'empty output, no launch'}"


def as_matrices(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, tuple]:
    """``a`` and ``b`` (at least 1-D) as at least 2-D views (a 1-D ``a`` a row, a 1-D ``b`` a
    column), their batch dimensions of size 1 dropped where the other operand has none, and the
    broadcast batch shape."""
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    batch = broadcast_batch(tuple(a2.shape[:-2]), tuple(b2.shape[:-2]))
    # a batch of ones broadcasts as no batch: take the matrix itself (a view)
    if b2.dim() > 2 and prod(b2.shape[:-2]) == 1:
        b2 = b2.reshape(b2.shape[-2:])
    if a2.dim() > 2 and prod(a2.shape[:-2]) == 1 and b2.dim() > 2:
        a2 = a2.reshape(a2.shape[-2:])
    return a2, b2, batch


def folds(t: torch.Tensor) -> bool:
    """Whether ``t (*, M, K)``'s leading dimensions fold into M without a copy (``t.reshape(-1,
    K)`` is a view): each dimension's stride is the next one's stride times its size, sizes of 1
    aside."""
    return _collapses(t.shape[:-1], t.stride()[:-1])


def _collapses(sizes, strides) -> bool:
    dims = [(sz, st) for sz, st in zip(sizes, strides) if sz != 1]
    return all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1))


def batch_mode(a2: torch.Tensor, b2: torch.Tensor) -> str:
    """``as_matrices``' views -> how the product runs, but for "batched" against "loop" (which
    the family decides): ``"2-D"``, ``"folded"``, ``"folded, a copied"`` or ``"batch"``."""
    if b2.dim() == 2:
        if a2.dim() == 2:
            return "2-D"
        return "folded" if folds(a2) else "folded, a copied"
    return "batch"


def _batches(a2, b2, batch, c):
    """Both operands expanded to the batch (stride 0 where broadcast) and ``c``, their batch
    dimensions split into outer ones and one inner dimension collapsed from the longest run at
    the end that collapses for both: ``[(a3, b3, c3), ...]``, one (B, ., .) triple per outer index."""
    if len(batch) == 1:  # torch.bmm's case, on the eager hot path: nothing to collapse
        return [
            (
                a2 if a2.dim() == 3 and a2.shape[0] == batch[0] else a2.expand(batch + tuple(a2.shape[-2:])),
                b2 if b2.dim() == 3 and b2.shape[0] == batch[0] else b2.expand(batch + tuple(b2.shape[-2:])),
                c,
            )
        ]
    ae = a2.expand(batch + tuple(a2.shape[-2:]))
    be = b2.expand(batch + tuple(b2.shape[-2:]))
    n = len(batch)
    start = next(
        i for i in range(n) if _collapses(batch[i:], ae.stride()[i:n]) and _collapses(batch[i:], be.stride()[i:n])
    )
    a3, b3, c3 = (t.flatten(start, n - 1) for t in (ae, be, c))  # views: the run collapses
    return [(a3[i], b3[i], c3[i]) for i in itertools.product(*map(range, batch[:start]))]


def _launches(a2, b2, batch, c, epilogue, algo):
    """``(mode, plan of the first launch, [(a_i, b_i, c_i), ...])``: the GEMMs of the product,
    ``c`` the output viewed as ``batch + (M, N)`` (contiguous)."""
    mode = batch_mode(a2, b2)
    K, N = b2.shape[-2], b2.shape[-1]
    if mode == "2-D":  # (a batch of ones at most)
        work = [(a2, b2, c.view(a2.shape[0], N))]
    elif mode.startswith("folded"):
        rows = prod(a2.shape[:-1])
        work = [(a2.reshape(rows, K), b2, c.view(rows, N))]
    else:
        work = _batches(a2, b2, batch, c)
        p = plan_for(*work[0][:2], epilogue, algo)
        if getattr(p, "batch", 0):
            return "batched", p, work
        work = [(x[j], y[j], z[j]) for x, y, z in work for j in range(x.shape[0])]
        return "loop", plan_for(*work[0][:2], epilogue, algo), work
    x, y, _ = work[0]
    return mode, plan_for(x.contiguous() if mode == "folded, a copied" else x, y, epilogue, algo), work


def output_view(out: torch.Tensor, batch: tuple, M: int, N: int) -> torch.Tensor:
    """The output (contiguous, torch.matmul's shape) as ``batch + (M, N)``."""
    return out.view(batch + (M, N))


def batch_plan(a: torch.Tensor, b: torch.Tensor, epilogue: str = "EpiNone", algo: str = "auto") -> BatchPlan:
    """The ``BatchPlan`` of ``a @ b`` (torch.matmul's shapes, arguments already checked);
    each launch planned by ``planner.plan_for``."""
    a2, b2, batch = as_matrices(a, b)
    M, N = a2.shape[-2], b2.shape[-1]
    if prod(batch) * M * N == 0:
        mode = batch_mode(a2, b2)
        return BatchPlan("loop" if mode == "batch" else mode, 0, batch, None)
    c = torch.empty(batch + (M, N), dtype=a.dtype, device="meta")
    mode, p, work = _launches(a2, b2, batch, c, epilogue, algo)
    return BatchPlan(mode, len(work), batch, p)


def run(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    epilogue: str = "EpiNone",
    algo: str = "auto",
    epi: tuple = NO_ARGS,
) -> None:
    """``out`` (contiguous, torch.matmul's shape of ``a @ b``) = epilogue(``a @ b``), ``epi``
    its packed arguments (``epilogues.args``): each GEMM (2-D, or a batch) planned by
    ``planner.plan_for`` and run by ``planner.run``. Nothing runs for an empty output; K = 0
    gives the epilogue of 0."""
    if a.dim() == 2 and b.dim() == 2:  # the eager hot path: one GEMM, nothing to fold
        if out.numel():
            launcher_for(a, b, epilogue, algo)(a, b, out, epi)
        return
    if out.numel() == 0:
        return
    if a.dim() == 3 and b.dim() == 3 and a.shape[0] == b.shape[0] > 1:  # torch.bmm's case: as _batches makes it
        p = plan_for(a, b, epilogue, algo)
        if getattr(p, "batch", 0):
            run_plan(p, a, b, out, epi=epi)
            return
    a2, b2, batch = as_matrices(a, b)
    c = output_view(out, batch, a2.shape[-2], b2.shape[-1])
    _mode, p, work = _launches(a2, b2, batch, c, epilogue, algo)
    for i, (x, y, z) in enumerate(work):
        run_plan(p if i == 0 else plan_for(x, y, epilogue, algo), x, y, z, epi=epi)
