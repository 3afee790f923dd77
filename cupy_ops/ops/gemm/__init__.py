"""The GEMM kernel families, for matmul and linear_relu_div alike.

One module per family (naive, simt, tc, wgmma, tf32x3, fp16x3), each exposing ``NAME``,
``supports`` (why it cannot take a problem, or None), ``plan`` (a ``GemmPlan``: kernel, tile,
split-K, grid, what is done to each operand), ``run`` (carries a plan out) and ``variants``
(every kernel a plan can name, declared for the offline check); a family with a batched kernel
also ``batched`` (its plan over a batch in the grid's z, or None where it cannot take it).
The shapes of torch.matmul (1-D, batched, broadcast) reach the plans through ``batch``. ``planner`` is their one
registry: the family choice (``choose``), the plan and its cache (``plan_for``) and the runner.

    p = plan_for(a, b)                 # which kernel "auto" picks for these tensors, and why
    print(p)                           # "wgmma: gemm_wgmma<bf16, true, 256, 2, EpiNone>, ..."
    run(p, a, b, c)                    # c = a @ b

The two ops differ only in their epilogue (``"EpiNone"``; ``"EpiBiasReluScale"``: bias, ReLU,
scale) and in their arguments: linear_relu_div's B is ``weight.T``. Geometry shared with the
kernels: ``geometry``; the tuning tables: ``tables``; the decisions behind both: docs/gemm.md.
"""

from __future__ import annotations

import torch

from ... import checks
from . import batch, epilogues, fp16x3, packed
from .batch import BatchPlan
from .common import EPILOGUES, Device, GemmPlan, Matrix, Operand, Overrides, runs_sm90a
from .epilogues import NO_ARGS
from .planner import (
    ALGOS,
    FAMILIES,
    PACKED_ALGOS,
    choose,
    fp32_accurate,
    layer,
    plan,
    plan_for,
    product,
    run,
    run_layer,
    supports,
    tf32_allowed,
    variants,
)
from .runtime import device_info

__all__ = [
    "ALGOS",
    "EPILOGUES",
    "FAMILIES",
    "BatchPlan",
    "Device",
    "GemmPlan",
    "Matrix",
    "Operand",
    "Overrides",
    "choose",
    "device_info",
    "epilogues",
    "fp32_accurate",
    "gemm_plan",
    "layer",
    "matmul_into",
    "packed",
    "plan",
    "plan_for",
    "product",
    "run",
    "run_layer",
    "runs_sm90a",
    "supports",
    "tf32_allowed",
    "variants",
]


def gemm_plan(
    a: torch.Tensor, b: torch.Tensor, *, algo: str = "auto", bias_relu_scale: bool = False
) -> GemmPlan | BatchPlan:
    """Which kernel ``matmul(a, b, algo=algo)`` takes, and how: the kernel family and
    instantiation, tile, split-K, grid and what is done to each operand (read in place,
    copied, transposed). For ``linear_relu_div(x, weight, ...)`` pass ``(x, weight.T)`` and
    ``bias_relu_scale=True`` (a ``cupy_ops.prepack``-ed weight: the plan over its pieces, where
    the layer takes them). ``print(plan)`` gives one readable line.

    Args:
        a, b: as for ``matmul`` (torch.matmul's shapes).
        algo: as for ``matmul``.
        bias_relu_scale: plan the fused epilogue of ``linear_relu_div``.
    Returns:
        For 2-D operands a ``GemmPlan`` (a frozen dataclass; ``str()`` of it is the readable
        line); for any other shapes a ``BatchPlan``: how the batch is carried out (folded into M,
        or one GEMM per batch entry), the number of launches, and the ``GemmPlan`` of each
        launch (its fields read through, ``plan.family``).
    Raises:
        TypeError, ValueError: those of ``matmul`` for bad arguments; ``ValueError`` when 2-D
        operands give an empty output (no kernel runs).

    Example:
        >>> a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
        >>> print(cupy_ops.gemm_plan(a, a))   # on an H100: "wgmma: gemm_wgmma<bf16, ...>, tile ..., grid ...; ..."
    """
    checks.matmul_args(a, b, algo, ALGOS)
    epilogue = "EpiBiasReluScale" if bias_relu_scale else "EpiNone"
    if a.dim() == 2 and b.dim() == 2:
        checks.nonempty_output(a.shape[0], b.shape[1])
        # the layer reads a prepacked weight's pieces where its plan takes them (matmul never)
        if bias_relu_scale and algo in PACKED_ALGOS and a.dtype == torch.float32 and _prepacked_t(b):
            p = plan_for(a, b, epilogue, algo, b_packed=True)
            if p.b.prep == "prepacked":
                return p
        return plan_for(a, b, epilogue, algo)
    return batch.batch_plan(a, b, epilogue, algo)


def _prepacked_t(b: torch.Tensor) -> bool:
    """Whether ``b`` is ``weight.T`` of a prepacked weight (the view a layer's plan is asked of)."""
    w = b._base
    return (
        w is not None
        and packed.lookup(w) is not None
        and b.data_ptr() == w.data_ptr()
        and tuple(b.shape) == tuple(reversed(w.shape))
        and b.stride() == tuple(reversed(w.stride()))
    )


def matmul_into(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    epilogue: str = "EpiNone",
    algo: str = "auto",
    epi: tuple = NO_ARGS,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """``out`` = epilogue(``a @ b``) for operands of torch.matmul's shapes (checked by the
    caller) and ``out`` contiguous of the product's shape, ``epi`` the epilogue's packed
    arguments (``epilogues.args``): folded into one GEMM or one GEMM per batch entry
    (``batch``), each as its plan says. ``weight``: ``b`` is ``weight.T`` (a Linear's), whose
    prepacked fp16x3 pieces (``packed``) a float32 plan of fp16x3 reads."""
    # only "accurate" and "fp16x3" plan fp16x3: any other algo reads the weight, unplanned here
    entry = packed.lookup(weight) if weight is not None and algo in PACKED_ALGOS else None
    if entry is not None and a.dtype == torch.float32 and out.numel():
        a2 = a.reshape(-1, a.shape[-1])  # x (*, K) folded into rows (a copy where its strides do not allow)
        p = plan_for(a2, b, epilogue, algo, b_packed=True)
        pieces = entry.pieces_for(weight) if p.b.prep == "prepacked" else None
        if pieces is not None:
            fp16x3.run_packed(p, a2, pieces, out.view(a2.shape[0], b.shape[1]), epi)
            return out
    batch.run(a, b, out, epilogue, algo, epi)
    return out
