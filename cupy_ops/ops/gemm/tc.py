"""tc: tensor cores through mma.sync (gemm_tc.cuh, sm_80+): 128 x 128 tiles, 3 cp.async stages,
fp32 accumulation. What "auto" takes for 16-bit (and TF32-allowed float32) off Hopper, and
for K = 0 on Hopper (no tile to load: it writes the epilogue of 0)."""

from __future__ import annotations

from dataclasses import replace

from ... import launch
from ...dtypes import CUDA_NAMES
from . import geometry
from .common import (
    EPILOGUES,
    TENSOR_CORE_DTYPES,
    GemmPlan,
    Matrix,
    batch_aligned,
    cdiv,
    kmajor_operand,
    tiled_sizes,
)
from .runtime import declare, handle, launch_entries, prepare

NAME = "tc"


def supports(M: int, N: int, K: int, dtype, dev) -> str | None:
    return tiled_sizes(M, N, K) or (
        None if dtype in TENSOR_CORE_DTYPES else f"takes float16, bfloat16 or float32 (TF32) operands, got {dtype}"
    )


def plan(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, ov, notes=()) -> GemmPlan:
    return GemmPlan(
        NAME,
        f"gemm_tc<{CUDA_NAMES[dtype]}, {epi}>",
        "gemm.cu",
        (cdiv(N, geometry.TC_TILE), cdiv(M, geometry.TC_TILE), 1),
        (geometry.TC_THREADS, 1, 1),
        geometry.TC_SMEM_BYTES,
        kmajor_operand(a),
        kmajor_operand(b.T),
        (geometry.TC_TILE, geometry.TC_TILE),
        notes=tuple(notes),
    )


def plan_empty_k(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, ov) -> GemmPlan:
    """The Hopper families' plan for K == 0: this kernel writes the epilogue of 0."""
    return plan(M, N, K, dtype, a, b, epi, dev, ov, notes=("K == 0: the tc kernel writes the epilogue of 0",))


def batched(p: GemmPlan, a: Matrix, b: Matrix, sa: int, sb: int, batch: int, epi: str, dev, ov) -> GemmPlan | None:
    """``p`` over a batch (``gemm_tc_batched``: the entry in the grid's z, operands ``sa`` / ``sb``
    elements apart, 0: broadcast): matmul's (no epilogue) where both operands are read in place
    and every entry's rows stay 16-byte aligned; None (one GEMM per entry) otherwise."""
    if (
        epi != "EpiNone"
        or p.a.prep != "as is"
        or p.b.prep != "as is"
        or not (batch_aligned(sa, a.itemsize) and batch_aligned(sb, b.itemsize))
    ):
        return None
    return replace(
        p,
        kernel=p.kernel.replace("gemm_tc<", "gemm_tc_batched<"),
        grid=p.grid[:2] + (min(batch, geometry.MAX_GRID_Z),),
        batch=batch,
    )


def variants() -> dict[str, list[str]]:
    return {
        "gemm.cu": [f"gemm_tc<{CUDA_NAMES[dt]}, {e}>" for dt in TENSOR_CORE_DTYPES for e in EPILOGUES]
        + [f"gemm_tc_batched<{CUDA_NAMES[dt]}, EpiNone>" for dt in TENSOR_CORE_DTYPES]
    }


KERNELS = declare(variants())


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    """c = epilogue(a @ b); batched plans: a (B, M, K), b (B, K, N) views read in place, c (B, M, N)."""
    if p.batch:
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        launch_entries(
            KERNELS,
            p,
            c.get_device(),
            lambda z0: (
                a.data_ptr(),
                p.a.ld,
                a.stride(0),
                b.data_ptr(),
                p.b.ld,
                b.stride(0),
                c.data_ptr(),
                M,
                N,
                K,
                z0,
                *epi,
            ),
        )
        return
    (M, K), N = a.shape, b.shape[1]
    a2, bt = prepare(a, p.a), prepare(b.t(), p.b)
    launch.launch(
        handle(KERNELS, p.kernel, c.get_device()),
        p.grid,
        p.block,
        (a2.data_ptr(), p.a.ld, bt.data_ptr(), p.b.ld, c.data_ptr(), M, N, K, *epi),
        p.smem,
    )
