"""naive: one thread per output element, any strides, every size in 64-bit: the reference
kernel (gemm_naive.cuh), and what "auto" takes for float64 and sizes the tiled kernels refuse."""
from __future__ import annotations

from ... import launch
from ...dtypes import CUDA_NAMES
from . import geometry as g
from .common import EPILOGUES, GemmPlan, Operand, cdiv
from .runtime import declare, handle

NAME = "naive"


def supports(M: int, N: int, K: int, dtype, dev) -> str | None:
    """Every dtype and size: None."""
    return None


def plan(M, N, K, dtype, a, b, epi, dev, ov) -> GemmPlan:
    return GemmPlan(NAME, f"gemm_naive<{CUDA_NAMES[dtype]}, {epi}>", "gemm.cu",
                    (cdiv(N, 16), max(1, min(cdiv(M, 16), g.MAX_GRID_Y)), 1), g.NAIVE_BLOCK, 0,
                    Operand("as is", a.stride1 == 1, a.stride0), Operand("as is", b.stride0 == 1, b.stride1), (1, 1))


def variants() -> dict[str, list[str]]:
    return {"gemm.cu": [f"gemm_naive<{T}, {e}>" for T in CUDA_NAMES.values() for e in EPILOGUES]}


KERNELS = declare(variants())


def run(p: GemmPlan, a, b, c, bias: int, scale: float) -> None:
    (M, K), N = a.shape, b.shape[1]
    launch.launch(handle(KERNELS, p.kernel, c.get_device()), p.grid, p.block,
                  (a.data_ptr(), a.stride(0), a.stride(1), b.data_ptr(), b.stride(0), b.stride(1), c.data_ptr(),
                   M, N, K, bias, scale))
