"""What every GEMM family's runner shares: its kernels declared on the compile layer, the
device's properties for the plan, operands brought into the planned form, the split-K
reduction."""

from __future__ import annotations

import torch

from ... import device, launch
from ...dtypes import CUDA_NAMES
from ...kernel import Kernel
from . import epilogues, geometry
from .common import EPILOGUES, TENSOR_CORE_DTYPES, Device, Operand

SM90A = "gemm_sm90a.cu"
# address sets (operands, output, workspace, epilogue arguments) a launcher keeps packed: past
# them it forgets them all and packs again
PACKED_SETS_PER_LAUNCHER = 64


def declare(variants: dict[str, list[str]]) -> dict[str, Kernel]:
    """One ``Kernel`` per kernel name in ``variants`` (``{source file: [name expressions]}``),
    with every variant registered for the offline check; files ``*_sm90a.cu`` are built for
    sm_90a only."""
    kernels = {}
    for filename, exprs in variants.items():
        sm90a = filename == SM90A
        by_name: dict[str, list[str]] = {}
        for e in exprs:
            by_name.setdefault(e.split("<")[0], []).append(e)
        for name, ex in by_name.items():
            kernels[name] = Kernel.builtin(
                filename,
                name,
                ex,
                arch="sm_90a" if sm90a else None,
                defines=geometry.SM90A_DEFINES if sm90a else geometry.DEFINES,
                suffix=epilogues.BUILTIN_CODE,  # linear_relu_div's epilogue, a declaration
            )
    return kernels


_with_epilogue: dict[str, Kernel] = {}  # name expression -> its kernel with the user epilogue's code


def handle(kernels: dict[str, Kernel], expr: str, device: int) -> launch.KernelHandle:
    """The loaded variant ``expr`` of ``kernels`` (``declare``'s) on ``device``; an expression
    naming a user's epilogue compiles with its code after the file (``epilogues.code_for``)."""
    kernel = kernels[expr.split("<")[0]]
    if epilogues.USER_PREFIX in expr:
        k = _with_epilogue.get(expr)
        if k is None:
            k = _with_epilogue[expr] = kernel.with_suffix(epilogues.code_for(expr), [expr])
        kernel = k
    return kernel.handle(expr, device)


_devices: dict[int, Device] = {}


def device_info(index: int) -> Device:
    """The plan's view of CUDA device ``index`` (SM count, compute capability, memory
    bandwidth), cached."""
    d = _devices.get(index)
    if d is None:
        d = Device(index, device.sm_count(index), device.capability(index), device.memory_bandwidth(index))
        _devices[index] = d
    return d


# --- operands ---------------------------------------------------------------------------------

TRANSPOSE = Kernel.builtin(
    "transpose.cu",
    "transpose",
    {dt: f"transpose<{c}>" for dt, c in CUDA_NAMES.items()},
    defines=geometry.TRANSPOSE_DEFINES,
)


def prepare(t: torch.Tensor, op: Operand) -> torch.Tensor:
    """``t`` (rows, K) in the tensor-core form ``op`` planned (``common.kmajor_operand``): as is,
    or copied into K-major rows of ``op.ld`` elements (the padding zeroed: the kernels' last
    16-byte copy of a row covers it, and no uninitialized memory may be read). A ``"k-major
    copy"`` also takes a batch, ``t`` (entries, rows, K)."""
    if op.prep == "as is":
        return t
    k = t.shape[-1]
    buf = torch.empty(t.shape[:-1] + (op.ld,), dtype=t.dtype, device=t.device)
    if op.prep == "transpose":
        rows = t.shape[0]
        tile = geometry.TRANSPOSE_TILE
        grid = (launch.cdiv(rows, tile), min(launch.cdiv(k, tile), geometry.MAX_GRID_Y), 1)
        launch.launch(
            TRANSPOSE.handle(t.dtype, t.get_device()),
            grid,
            (tile, geometry.TRANSPOSE_ROWS, 1),
            (t.data_ptr(), t.stride(1), buf.data_ptr(), op.ld, k, rows),
        )
    else:
        buf[..., :k].copy_(t)
    if op.ld > k:
        buf[..., k:].zero_()
    return buf


# --- split-K ----------------------------------------------------------------------------------


def reduce_variants() -> list[str]:
    """The split-K reductions (gemm.cu), one per tensor-core dtype and epilogue."""
    return [f"gemm_splitk_reduce<{CUDA_NAMES[dt]}, {e}>" for dt in TENSOR_CORE_DTYPES for e in EPILOGUES]


REDUCE = declare({"gemm.cu": reduce_variants()})


def reduce_step(p, part: int, c: torch.Tensor, epi: tuple) -> tuple:
    """The launch (``(handle, grid, block, args, shared memory)``) of c = epilogue(sum of the
    split-K slices of fp32 partial sums at device address ``part``), in order (deterministic)."""
    M, N = c.shape
    return (
        handle(REDUCE, p.reduce, c.get_device()),
        p.reduce_grid,
        (geometry.REDUCE_THREADS, 1, 1),
        (part, c.data_ptr(), M, N, p.slices, *epi),
        0,
    )


def reduce(p, ws: torch.Tensor, c: torch.Tensor, epi: tuple) -> None:
    """c = epilogue(sum of the split-K slices of ``ws`` (slices, M, N) fp32), in order."""
    launch.launch(*reduce_step(p, ws.data_ptr(), c, epi))
