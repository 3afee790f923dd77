"""naive: one thread per output element, any strides, every size in 64-bit: the reference
kernel (gemm_naive.cuh), and what "auto" takes for float64 and sizes the tiled kernels refuse."""

from __future__ import annotations

from dataclasses import replace

from ... import launch
from ...dtypes import CUDA_NAMES
from . import geometry
from .common import EPILOGUES, GemmPlan, Operand, cdiv
from .runtime import declare, handle, launch_entries

NAME = "naive"


def supports(M: int, N: int, K: int, dtype, dev) -> str | None:
    """Every dtype and size: None."""
    return None


def plan(M, N, K, dtype, a, b, epi, dev, ov) -> GemmPlan:
    return GemmPlan(
        NAME,
        f"gemm_naive<{CUDA_NAMES[dtype]}, {epi}>",
        "gemm.cu",
        (cdiv(N, 16), max(1, min(cdiv(M, 16), geometry.MAX_GRID_Y)), 1),
        geometry.NAIVE_BLOCK,
        0,
        Operand("as is", a.stride1 == 1, a.stride0),
        Operand("as is", b.stride0 == 1, b.stride1),
        (1, 1),
    )


def batched(p: GemmPlan, a, b, sa: int, sb: int, batch: int, epi: str, dev, ov) -> GemmPlan | None:
    """``p`` over a batch (``gemm_naive_batched``: the entry in the grid's z, operands ``sa`` /
    ``sb`` elements apart): every batch of matmul's (no epilogue; linear_relu_div's batch folds)."""
    if epi != "EpiNone":
        return None
    return replace(
        p,
        kernel=p.kernel.replace("gemm_naive<", "gemm_naive_batched<"),
        grid=p.grid[:2] + (min(batch, geometry.MAX_GRID_Z),),
        batch=batch,
    )


def variants() -> dict[str, list[str]]:
    return {
        "gemm.cu": [f"gemm_naive<{T}, {e}>" for T in CUDA_NAMES.values() for e in EPILOGUES]
        + [f"gemm_naive_batched<{T}, EpiNone>" for T in CUDA_NAMES.values()]
    }


KERNELS = declare(variants())


def run(p: GemmPlan, a, b, c, epi: tuple) -> None:
    """c = epilogue(a @ b); batched plans: a (B, M, K), b (B, K, N) views, c (B, M, N) contiguous."""
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if not p.batch:
        launch.launch(
            handle(KERNELS, p.kernel, c.get_device()),
            p.grid,
            p.block,
            (
                a.data_ptr(),
                a.stride(0),
                a.stride(1),
                b.data_ptr(),
                b.stride(0),
                b.stride(1),
                c.data_ptr(),
                M,
                N,
                K,
                *epi,
            ),
        )
        return
    launch_entries(
        KERNELS,
        p,
        c.get_device(),
        lambda z0: (
            a.data_ptr(),
            a.stride(1),
            a.stride(2),
            a.stride(0),
            b.data_ptr(),
            b.stride(1),
            b.stride(2),
            b.stride(0),
            c.data_ptr(),
            M,
            N,
            K,
            z0,
            *epi,
        ),
    )
