"""What every GEMM family's runner shares: its kernels declared on the compile layer, the
device's properties for the plan, operands brought into the planned form, the split-K
reduction."""

from __future__ import annotations

import re

import torch

from ... import compiler, device, launch
from ...compiler import cache, nvrtc
from ...dtypes import CUDA_NAMES
from ...kernel import Kernel
from . import epilogues, geometry
from .common import EPILOGUES, TENSOR_CORE_DTYPES, Device, Operand

SM90A = "gemm_sm90a.cu"
# address sets (operands, output, workspace, epilogue arguments) a launcher keeps packed: past
# them it forgets them all and packs again
PACKED_SETS_PER_LAUNCHER = 64


def launch_steps(cache: dict, key, make) -> None:
    """Launch the steps ``make()`` lists (``(handle, grid, block, args, shared memory)`` each),
    their arguments packed once per ``key`` (an address set) into ``cache``: a launcher's call
    seen before is lookups and launches."""
    steps = cache.get(key)
    if steps is None:
        if len(cache) >= PACKED_SETS_PER_LAUNCHER:
            cache.clear()
        steps = cache[key] = [(h, grid, block, h.packed(*args), smem) for h, grid, block, args, smem in make()]
    for h, grid, block, packed, smem in steps:
        launch.launch_packed(h, grid, block, packed, smem)


def packed_launcher(h, grid, block, smem: int, cluster, args_of):
    """``fn(a, b, c, epi)``: one launch of ``h`` with ``args_of(a, b, c, epi)``, packed once per
    address set (the three tensors' and the epilogue's packed arguments, ``epi[2]``, which keep
    a zero scale's sign): a GEMM launcher's call seen before is a lookup and the driver's launch.
    For launchers bound to one signature (shapes, strides, dtypes: ``planner.launcher_for``)."""
    by_address: dict[tuple, tuple] = {}

    def run(a, b, c, epi):
        key = (a.data_ptr(), b.data_ptr(), c.data_ptr(), epi[2])
        packed = by_address.get(key)
        if packed is None:
            if len(by_address) >= PACKED_SETS_PER_LAUNCHER:
                by_address.clear()
            packed = by_address[key] = h.packed(*args_of(a, b, c, epi))
        launch.launch_packed(h, grid, block, packed, smem, cluster)

    return run


def launch_entries(kernels: dict[str, Kernel], p, device: int, args_of) -> None:
    """A batched plan whose kernel takes the entry in grid z (naive, simt, tc): its ``p.batch``
    entries in launches of at most MAX_GRID_Z, ``args_of(z0)`` the arguments of the launch whose
    first entry is z0."""
    h = handle(kernels, p.kernel, device)
    for z0 in range(0, p.batch, geometry.MAX_GRID_Z):
        launch.launch(h, p.grid[:2] + (min(p.batch - z0, geometry.MAX_GRID_Z),), p.block, args_of(z0), p.smem)


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
    buf = torch.empty(*t.shape[:-1], op.ld, dtype=t.dtype, device=t.device)
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


def split_workspace(p, c: torch.Tensor) -> torch.Tensor:
    """Split-K's fp32 partial sums of plan ``p`` for the output ``c`` (M, N): (slices, M, N) on
    c's device, summed in order by the reduction (``reduce``, ``reduce_step``)."""
    return torch.empty(p.slices, *c.shape, dtype=torch.float32, device=c.device)


def reduce(p, ws: torch.Tensor, c: torch.Tensor, epi: tuple) -> None:
    """c = epilogue(sum of the split-K slices of ``ws`` (slices, M, N) fp32), in order."""
    launch.launch(*reduce_step(p, ws.data_ptr(), c, epi))


# --- a user epilogue by a pass after the GEMM -------------------------------------------------


def after_variants() -> list[str]:
    """The pass that applies an epilogue after the GEMM (gemm.cu), one per tensor-core dtype;
    registered with the built-in epilogue for the offline check (users' compile on first use)."""
    return [f"gemm_epilogue_after<{CUDA_NAMES[dt]}, {epilogues.BIAS_RELU_SCALE}>" for dt in TENSOR_CORE_DTYPES]


AFTER = declare({"gemm.cu": after_variants()})


def after_expr(dtype: torch.dtype, tag: str) -> str:
    """The pass's name expression for outputs of ``dtype`` and epilogue ``tag``."""
    return f"gemm_epilogue_after<{CUDA_NAMES[dtype]}, {tag}>"


def after_step(tag: str, c: torch.Tensor, epi: tuple, h: launch.KernelHandle | None = None) -> tuple:
    """The launch (``(handle, grid, block, args, shared memory)``) of c (M, N, rows
    contiguous) = epilogue ``tag``(c) in place, ``epi`` its packed arguments: without the bias,
    which the GEMM added. ``h``: the pass's handle for c's dtype and device, where the caller
    holds it."""
    M, N = c.shape
    es, ld = c.element_size(), c.stride(0)
    each = geometry.AFTER_THREADS * geometry.AFTER_VECS * 16 // es  # values a block
    rows = min(M, geometry.MAX_GRID_Y)
    vec = int((c.data_ptr() | ld * es) % 16 == 0)
    if h is None:
        h = handle(AFTER, after_expr(c.dtype, tag), c.get_device())
    args = (c.data_ptr(), ld, M, N, vec, 0, epi[1], epi[2])
    return h, (launch.cdiv(N, each), rows, launch.cdiv(M, rows)), (geometry.AFTER_THREADS, 1, 1), args, 0


# IEEE division, reciprocal and square root: ptxas expands each into a slow path behind a branch
_SERIAL = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:(?:div|rcp|sqrt)\.rn\.|call)", re.M)
_serial: dict[tuple, int] = {}


def serial_ops(tag: str, dtype: torch.dtype, arch: str) -> int:
    """How many instructions of epilogue ``tag``'s code for ``dtype`` end a straight line of
    code (IEEE division, reciprocal and square root, calls): each makes the Hopper kernels'
    store apply it one value at a time. Counted in the PTX for ``arch`` ("sm_90") of
    gemm_epilogue_probe (one value, no loop), compiled by NVRTC (no GPU) on first use, kept in
    memory and in the kernel cache."""
    expr = after_expr(dtype, tag)
    k = (expr, arch)
    n = _serial.get(k)
    if n is None:
        src = AFTER[expr.split("<")[0]].with_suffix(epilogues.code_for(expr), [expr]).variant(expr).source
        probe = expr.replace("gemm_epilogue_after<", "gemm_epilogue_probe<")
        version = ".".join(map(str, nvrtc.version()))
        key = cache.key("serial ops", src.text(), "\0".join(src.options(arch)), probe, version)
        hit = cache.read(key)
        if hit is not None:
            n = int(hit[1].decode())
        else:
            n = len(_SERIAL.findall(compiler.export(src, arch, [probe], "ptx").image))
            cache.write(key, b"", str(n).encode())
        _serial[k] = n
    return n
