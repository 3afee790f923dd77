"""torch.matmul's shapes on the 2-D plans: 1-D operands, batch dimensions, broadcasting.

A product ``a (*A, M, K) @ b (*B, K, N)`` (a 1-D ``a`` a row, a 1-D ``b`` a column) is carried
out in one of three ways, chosen here (``batch_plan``) and nowhere else:

- ``"2-D"``: no batch: one GEMM.
- ``"folded"``: ``b`` has no batch (or only batch dimensions of size 1): ``a``'s batch
  dimensions fold into M, one GEMM of ``prod(A) * M`` rows; a view of ``a`` when its strides
  allow (``a.reshape(-1, K)`` is a view), else ``a`` is copied first (``"folded, a copied"``),
  as torch's own matmul copies it. linear_relu_div's ``x (*, in)`` always takes this route.
- ``"loop"``: both operands batched (or a 2-D ``a`` with a batched ``b``): one 2-D GEMM per
  entry of the broadcast batch, each on views (a broadcast dimension is a stride-0 view, never
  a copy). No family has a batched kernel yet (a batch index in the grid with per-operand batch
  strides): this loop is the interim, correct for every family, at one launch per entry.

Pure except ``run``: ``batch_plan`` reads shapes and strides only.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from ...checks import broadcast_batch, prod
from .common import GemmPlan

MODES = ("2-D", "folded", "folded, a copied", "loop")


@dataclass(frozen=True)
class BatchPlan:
    """How a batched / broadcast product reaches the 2-D GEMMs (see the module's docstring):
    ``mode`` (one of ``MODES``), ``launches`` (GEMMs run), ``batch`` (the broadcast batch shape)
    and ``gemm``, the 2-D plan of each launch (None where the output is empty). Every field of
    ``gemm`` reads through (``plan.family``, ``plan.kernel``, ...)."""

    mode: str
    launches: int
    batch: tuple
    gemm: GemmPlan | None

    def __getattr__(self, name):
        if name.startswith("__") or name == "gemm":
            raise AttributeError(name)
        return getattr(self.gemm, name)

    def __str__(self) -> str:
        how = {"2-D": "", "folded": "batch folded into M (a view); ",
               "folded, a copied": "batch folded into M (a copied first: its strides do not fold); ",
               "loop": f"one 2-D GEMM per batch entry ({self.launches} launches; no batched kernel yet); "}[self.mode]
        return f"batch {self.batch}: {how}{self.gemm if self.gemm is not None else 'empty output, no launch'}"


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
    dims = [(sz, st) for sz, st in zip(t.shape[:-1], t.stride()[:-1]) if sz != 1]
    return all(dims[i][1] == dims[i + 1][1] * dims[i + 1][0] for i in range(len(dims) - 1))


def batch_mode(a2: torch.Tensor, b2: torch.Tensor) -> str:
    """``as_matrices``' views -> how the product runs (``MODES``)."""
    if b2.dim() == 2:
        if a2.dim() == 2:
            return "2-D"
        return "folded" if folds(a2) else "folded, a copied"
    return "loop"


def _launches(a2, b2, batch, c):
    """``(mode, [(a_i, b_i, c_i), ...])``: the 2-D GEMMs of the product, ``c`` the output viewed
    as ``batch + (M, N)`` (contiguous)."""
    mode = batch_mode(a2, b2)
    K, N = b2.shape[-2], b2.shape[-1]
    if mode == "2-D":   # (a batch of ones at most)
        return mode, [(a2, b2, c.view(a2.shape[0], N))]
    if mode.startswith("folded"):
        rows = prod(a2.shape[:-1])
        return mode, [(a2.reshape(rows, K), b2, c.view(rows, N))]
    ae = a2.expand(batch + tuple(a2.shape[-2:]))
    be = b2.expand(batch + tuple(b2.shape[-2:]))
    return mode, [(ae[i], be[i], c[i]) for i in itertools.product(*map(range, batch))]


def output_view(out: torch.Tensor, batch: tuple, M: int, N: int) -> torch.Tensor:
    """The output (contiguous, torch.matmul's shape) as ``batch + (M, N)``."""
    return out.view(batch + (M, N))


def batch_plan(a: torch.Tensor, b: torch.Tensor, plan_for, epilogue: str = "EpiNone", algo: str = "auto"
               ) -> BatchPlan:
    """The ``BatchPlan`` of ``a @ b`` (torch.matmul's shapes, arguments already checked);
    ``plan_for`` gives a 2-D plan (ops.gemm.plan_for)."""
    a2, b2, batch = as_matrices(a, b)
    M, N = a2.shape[-2], b2.shape[-1]
    if prod(batch) * M * N == 0:
        return BatchPlan(batch_mode(a2, b2), 0, batch, None)
    c = torch.empty(batch + (M, N), dtype=a.dtype, device="meta")
    mode, launches = _launches(a2, b2, batch, c)
    x, y, _ = launches[0]
    if mode == "folded, a copied":
        x = x.contiguous()
    return BatchPlan(mode, len(launches), batch, plan_for(x, y, epilogue, algo))


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, plan_for, run2d, epilogue: str = "EpiNone",
        algo: str = "auto", bias: torch.Tensor | None = None, scale: float = 1.0) -> None:
    """``out`` (contiguous, torch.matmul's shape of ``a @ b``) = epilogue(``a @ b``): each 2-D
    GEMM planned by ``plan_for`` and run by ``run2d`` (ops.gemm's). Nothing runs for an empty
    output; K = 0 gives the epilogue of 0."""
    if out.numel() == 0:
        return
    a2, b2, batch = as_matrices(a, b)
    c = output_view(out, batch, a2.shape[-2], b2.shape[-1])
    for x, y, z in _launches(a2, b2, batch, c)[1]:
        run2d(plan_for(x, y, epilogue, algo), x, y, z, bias, scale)
