"""Carries out a GEMM plan (``gemm_plan.plan``): operand preparation, workspace, tensor maps
and launches, for matmul and linear_relu_div alike.

    p = plan_for(a, b)                 # which kernel "auto" picks for these tensors, and why
    print(p)                           # "wgmma: gemm_wgmma<bf16, true, 256, 2, EpiNone>, ..."
    run(p, a, b, c)                    # c = a @ b

``plan_for`` takes the plan's overrides (``tile_n``, ``split_k``, ...) for tuning; ``run`` launches
any plan made for tensors of the same shapes and layouts.
"""
from __future__ import annotations

import torch

from .. import checks, launch
from ..dtypes import CUDA_NAMES
from ..kernel import Kernel
from . import gemm_plan, tma
from .gemm_plan import Device, GemmPlan, Matrix


def _declare() -> dict[str, Kernel]:
    """One ``Kernel`` per GEMM kernel name, with every variant a plan can name."""
    kernels = {}
    for filename, exprs in gemm_plan.variants().items():
        sm90a = filename.endswith("_sm90a.cu")
        by_name: dict[str, list[str]] = {}
        for e in exprs:
            by_name.setdefault(e.split("<")[0], []).append(e)
        for name, ex in by_name.items():
            kernels[name] = Kernel.builtin(filename, name, ex, arch="sm_90a" if sm90a else None,
                                           defines=gemm_plan.SM90A_DEFINES if sm90a else gemm_plan.DEFINES)
    return kernels


KERNELS = _declare()
TRANSPOSE = Kernel.builtin("transpose.cu", "transpose", {dt: f"transpose<{c}>" for dt, c in CUDA_NAMES.items()},
                           defines=gemm_plan.TRANSPOSE_DEFINES)
_devices: dict[int, Device] = {}


def device_info(index: int) -> Device:
    """The plan's view of CUDA device ``index`` (SM count, compute capability), cached."""
    d = _devices.get(index)
    if d is None:
        props = torch.cuda.get_device_properties(index)
        d = _devices[index] = Device(index, props.multi_processor_count, launch.capability(index))
    return d


def _on_sm90a(t: torch.Tensor) -> bool:
    return t.is_cuda and gemm_plan.runs_sm90a(launch.capability(t.device.index))


def tf32x3_runs(t: torch.Tensor) -> bool:
    """Whether ``algo="tf32x3"`` (and ``"fp16x3"``) take ``t``'s dtype on its device: float32
    on a GPU of compute capability 9.0 (the models use them for float32 where they run). Reads
    only the dtype, the device and a cached capability, so torch.compile traces it as a
    constant."""
    return t.dtype == torch.float32 and _on_sm90a(t)


def wgmma_runs(t: torch.Tensor) -> bool:
    """Whether the Hopper kernel (``algo="wgmma"``) takes ``t``'s dtype on its device without
    TF32: float16 / bfloat16 on a GPU of compute capability 9.0. Like ``tf32x3_runs``, reads
    only the dtype, the device and a cached capability."""
    return t.dtype in (torch.float16, torch.bfloat16) and _on_sm90a(t)


def tf32_allowed() -> bool:
    """Whether torch would use TF32 for an fp32 matmul now (the switches torch reads)."""
    return torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"


# Plans by everything they depend on: planning costs ~20 us of Python, a lookup ~2 us; the
# eager call of a small GEMM is host-bound (benchmarks/host_profile.py: matmul bf16 1024^3,
# 40 us a call unplanned against 17 us before the plan existed, H200).
_plans: dict[tuple, GemmPlan] = {}
_PLAN_CACHE_LIMIT = 4096


def plan_for(a: torch.Tensor, b: torch.Tensor, epilogue: str = "EpiNone", algo: str = "auto", *,
             tile_n: int | None = None, split_k: bool = True, cluster: int | None = None,
             group: int | None = None, persistent: bool | None = None, tma_store: bool | None = None,
             swap: bool | None = None, ksplit: bool | None = None, single: bool | None = None) -> GemmPlan:
    """The plan for ``epilogue(a @ b)``: ``a`` (M, K) and ``b`` (K, N) CUDA tensors of one
    supported dtype (linear_relu_div's ``b`` is ``weight.T``), M and N > 0. The same plan
    ``cupy_ops.matmul`` / ``linear_relu_div`` would carry out with ``algo``; ``tile_n``,
    ``split_k``, ``cluster``, ``group``, ``persistent``, ``tma_store``, ``swap``, ``ksplit`` and
    ``single`` override its tables (``gemm_plan.plan``). Raises ``ValueError`` when ``algo``
    cannot take them."""
    tf32 = a.dtype == torch.float32 and tf32_allowed()
    key = (a.shape, a.stride(), a.data_ptr() & 15 == 0, b.shape, b.stride(), b.data_ptr() & 15 == 0, a.dtype,
           a.get_device(), epilogue, algo, tf32, tile_n, split_k, cluster, group, persistent, tma_store, swap, ksplit,
           single)
    p = _plans.get(key)
    if p is None:
        p = gemm_plan.plan(a.shape[0], b.shape[1], a.shape[1], a.dtype, Matrix.of(a), Matrix.of(b), epilogue,
                           device_info(a.get_device()), algo=algo, tf32=tf32, tile_n=tile_n, split_k=split_k,
                           cluster=cluster, group=group, persistent=persistent, tma_store=tma_store, swap=swap,
                           ksplit=ksplit, single=single)
        if len(_plans) >= _PLAN_CACHE_LIMIT:
            _plans.clear()
        _plans[key] = p
    return p


def explain(a: torch.Tensor, b: torch.Tensor, algo: str = "auto", bias_relu_scale: bool = False) -> GemmPlan:
    """``cupy_ops.gemm_plan``: the plan of ``matmul(a, b, algo=algo)`` (with the fused
    epilogue of linear_relu_div when ``bias_relu_scale``), after the arguments are checked."""
    checks.matmul_args(a, b, algo, gemm_plan.ALGOS)
    checks.nonempty_output(a.shape[0], b.shape[1])
    return plan_for(a, b, "EpiBiasReluScale" if bias_relu_scale else "EpiNone", algo)


def run(p: GemmPlan, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bias: torch.Tensor | None = None,
        scale: float = 1.0) -> torch.Tensor:
    """``c`` (M, N, contiguous) = epilogue(``a @ b``) as plan ``p`` says; ``bias`` (N,)
    contiguous or None and ``scale`` feed the epilogue (ignored by ``EpiNone``)."""
    _RUNNERS[p.family](p, a, b, c, 0 if bias is None else bias.data_ptr(), float(scale))
    return c


def _handle(expr: str, device: int) -> launch.KernelHandle:
    return KERNELS[expr.split("<")[0]].handle(expr, device)


def _run_naive(p, a, b, c, bias, scale):
    (M, K), N = a.shape, b.shape[1]
    launch.launch(_handle(p.kernel, c.get_device()), p.grid, p.block,
                  (a.data_ptr(), a.stride(0), a.stride(1), b.data_ptr(), b.stride(0), b.stride(1), c.data_ptr(),
                   M, N, K, bias, scale))


def _run_simt(p, a, b, c, bias, scale):
    (M, K), N = a.shape, b.shape[1]
    device = c.get_device()
    if p.a.prep == "contiguous copy":
        a = a.contiguous()
    if p.b.prep == "contiguous copy":
        b = b.contiguous()
    out = c if p.slices == 1 else torch.empty((p.slices, M, N), dtype=torch.float32, device=c.device)
    launch.launch(_handle(p.kernel, device), p.grid, p.block,
                  (a.data_ptr(), p.a.ld, b.data_ptr(), p.b.ld, out.data_ptr(), M, N, K,
                   int(p.a.vec) | int(p.b.vec) << 1, p.kslice, bias, scale), p.smem)
    if p.slices > 1:
        _reduce(p, out, c, bias, scale)


def _reduce(p, ws, c, bias, scale):
    """c = epilogue(sum of the split-K slices of ws), in order (deterministic)."""
    M, N = c.shape
    launch.launch(_handle(p.reduce, c.get_device()), p.reduce_grid, (gemm_plan.REDUCE_THREADS, 1, 1),
                  (ws.data_ptr(), c.data_ptr(), M, N, p.slices, bias, scale))


def tc_operand(t: torch.Tensor, op: gemm_plan.Operand) -> torch.Tensor:
    """``t`` (rows, K) in the tensor-core form ``op`` planned: as is, or copied into K-major
    rows of ``op.ld`` elements (the padding zeroed: the kernels' last 16-byte copy of a row
    covers it, and no uninitialized memory may be read)."""
    if op.prep == "as is":
        return t
    rows, k = t.shape
    buf = torch.empty((rows, op.ld), dtype=t.dtype, device=t.device)
    if op.prep == "transpose":
        tile = gemm_plan.TRANSPOSE_TILE
        grid = (launch.cdiv(rows, tile), min(launch.cdiv(k, tile), 65535), 1)
        launch.launch(TRANSPOSE.handle(t.dtype, t.get_device()), grid, (tile, gemm_plan.TRANSPOSE_ROWS, 1),
                      (t.data_ptr(), t.stride(1), buf.data_ptr(), op.ld, k, rows))
    else:
        buf[:, :k].copy_(t)
    if op.ld > k:
        buf[:, k:].zero_()
    return buf


def _run_tc(p, a, b, c, bias, scale):
    (M, K), N = a.shape, b.shape[1]
    a2, bt = tc_operand(a, p.a), tc_operand(b.t(), p.b)
    launch.launch(_handle(p.kernel, c.get_device()), p.grid, p.block,
                  (a2.data_ptr(), p.a.ld, bt.data_ptr(), p.b.ld, c.data_ptr(), M, N, K, bias, scale), p.smem)


def _maps(p, a, b):
    """``(a_map, b_map, keep)``: the TMA maps of the Hopper kernels' operands (tf32x3 reads the
    fp32 values unrounded; a K-major B tile is loaded in ``p.cluster`` parts, one per CTA of a
    cluster) and the prepared operands they point into, which the caller holds until the
    kernel is launched (freed earlier, their memory could be handed out again before the
    kernel reads it)."""
    (M, K), N = a.shape, b.shape[1]
    exact = p.family == "tf32x3"
    a2 = tc_operand(a, p.a)
    if p.swap:   # C^T = B^T A^T: A is the kernel's B side, B (row-major) its A side in 32 x 32 boxes
        return (tma.tensor_map(b, N, K, p.b.ld, gemm_plan.WG_SWAP_BOX, gemm_plan.WG_SWAP_BOX, exact=exact),
                tma.tensor_map(a2, K, M, p.a.ld, p.bk, p.tile[1] // p.cluster, exact=exact), (a2, b))
    a_map = tma.tensor_map(a2, K, M, p.a.ld, p.bk, p.tile[0], exact=exact)
    if p.b.prep == "n-major":   # boxes of 64 columns (128 bytes) x bk rows of K
        return a_map, tma.tensor_map(b, N, K, p.b.ld, 64, p.bk), (a2, b)
    bt = tc_operand(b.t(), p.b)
    return a_map, tma.tensor_map(bt, K, N, p.b.ld, p.bk, p.tile[1] // p.cluster, exact=exact), (a2, bt)


_NO_MAP = bytes(128)   # the c_map argument when the kernel stores C with its threads (not read)


def _run_hopper(p, a, b, c, bias, scale):
    """The Hopper kernels ("wgmma", "tf32x3"): TMA maps of the operands, and of C where the
    plan stores it through the TMA; the persistent grid lowered to the clusters that run at
    once (at most the plan's); split-K into an fp32 workspace that the reduction sums."""
    (M, K), N = a.shape, b.shape[1]
    h = _handle(p.kernel, c.get_device())
    a_map, b_map, keep = _maps(p, a, b)
    grid = p.grid
    if p.persistent:
        grid = (min(p.grid[0], p.cluster * max(launch.resident_clusters(h, p.cluster, p.block, p.smem), 1)), 1, 1)
    walk = (p.group,) if p.family == "wgmma" else ()   # the tf32x3 kernel has no tile walk
    if p.slices > 1:
        ws = torch.empty((p.slices, M, N), dtype=torch.float32, device=c.device)
        launch.launch(h, grid, p.block, (a_map, b_map, ws.data_ptr(), M, N, K, p.kslice) + walk, p.smem, p.cluster)
        _reduce(p, ws, c, bias, scale)
    elif p.swap and p.family == "wgmma":
        box = gemm_plan.WG_SWAP_BOX
        c_map = tma.tensor_map(c, N, M, N, box, box, exact=True)
        launch.launch(h, grid, p.block, (a_map, b_map, c_map, M, N, K, p.group, bias, scale), p.smem, p.cluster)
    elif p.family == "wgmma":
        c_map = (tma.tensor_map(c, N, M, N, 128 // c.element_size(), gemm_plan.WG_STORE_ROWS, exact=True)
                 if p.tma_store else _NO_MAP)
        launch.launch(h, grid, p.block, (a_map, b_map, c_map, int(p.tma_store), c.data_ptr(), N, M, N, K, p.group,
                                         bias, scale), p.smem, p.cluster)
    else:
        launch.launch(h, grid, p.block, (a_map, b_map, c.data_ptr(), N, M, N, K, bias, scale), p.smem)
    del keep   # launched: the stream orders any reuse of this memory after the kernel


def _split_rows(t: torch.Tensor, op: gemm_plan.Operand, hi: int, lo: int, ldo: int, ex: int) -> None:
    """fp16x3_split of ``t`` (rows, K) fp32, K-major rows ``op.ld`` apart, into the pieces at
    device addresses ``hi`` / ``lo`` (fp16, rows ``ldo`` apart) and the rows' exponents at ``ex``
    (int32)."""
    rows, k = t.shape
    launch.launch(_handle("fp16x3_split", t.get_device()), (rows, 1, 1), (gemm_plan.X3H_SPLIT_THREADS, 1, 1),
                  (t.data_ptr(), op.ld, rows, k, hi, lo, ldo, ex))


def _split_columns(b: torch.Tensor, op: gemm_plan.Operand, mag: int, hi: int, lo: int, ldn: int, ex: int) -> None:
    """fp16x3_colmax_n then fp16x3_split_n of a row-major ``b`` (K, N) fp32 (rows ``op.ld``
    apart) into the pieces at ``hi`` / ``lo`` (fp16, (K, N) rows ``ldn`` apart) and the columns'
    exponents at ``ex``; ``mag`` (int32, N) must hold zeros (the columns' atomicMax)."""
    k, n = b.shape
    cols, dev = launch.cdiv(n, 4 * gemm_plan.X3H_NSPLIT_THREADS), b.get_device()
    block = (gemm_plan.X3H_NSPLIT_THREADS, 1, 1)
    launch.launch(_handle("fp16x3_colmax_n", dev), (cols, min(launch.cdiv(k, gemm_plan.X3H_COLMAX_ROWS), 65535), 1),
                  block, (b.data_ptr(), op.ld, k, n, mag))
    launch.launch(_handle("fp16x3_split_n", dev), (cols, min(launch.cdiv(k, gemm_plan.X3H_NSPLIT_ROWS), 65535), 1),
                  block, (b.data_ptr(), op.ld, k, n, mag, hi, lo, ldn, ex))


def _piece_ld(k: int) -> int:
    """Row length of fp16x3 pieces of rows of ``k`` values: their tensor maps need 16-byte rows."""
    return launch.cdiv(max(k, 1), 8) * 8


def fp16x3_pieces(t: torch.Tensor, op: gemm_plan.Operand) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pieces, exponents)``: ``t`` (rows, K) fp32 split by fp16x3_split into ``pieces``
    (2, rows, K rounded up to 8) fp16, hi then lo, of ``t``'s rows scaled by 2^exponents[row]
    (int32, (rows,)); ``t`` first in the tensor-core form ``op`` planned (K-major rows)."""
    t = tc_operand(t, op)
    pieces = torch.empty((2, t.shape[0], _piece_ld(t.shape[1])), dtype=torch.float16, device=t.device)
    ex = torch.empty((t.shape[0],), dtype=torch.int32, device=t.device)
    _split_rows(t, op, pieces[0].data_ptr(), pieces[1].data_ptr(), pieces.shape[2], ex.data_ptr())
    return pieces, ex


def fp16x3_pieces_n(b: torch.Tensor, op: gemm_plan.Operand) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pieces, exponents)``: a row-major ``b`` (K, N) fp32 (rows ``op.ld`` apart, 16-byte
    aligned) split N-major by fp16x3_colmax_n and fp16x3_split_n into ``pieces`` (2, K, N
    rounded up to 8) fp16, hi then lo, of ``b``'s columns scaled by 2^exponents[n]."""
    k, n = b.shape
    pieces = torch.empty((2, k, _piece_ld(n)), dtype=torch.float16, device=b.device)
    ex = torch.empty((n,), dtype=torch.int32, device=b.device)
    mag = torch.zeros((n,), dtype=torch.int32, device=b.device)
    _split_columns(b, op, mag.data_ptr(), pieces[0].data_ptr(), pieces[1].data_ptr(), pieces.shape[2], ex.data_ptr())
    return pieces, ex


def _carve(sizes: list[int]) -> tuple[list[int], int]:
    """Offsets of parts of ``sizes`` bytes laid out one after another from 256-byte boundaries
    (the TMA reads a matrix from a 16-byte one), and the bytes they take together."""
    offsets, end = [], 0
    for n in sizes:
        offsets.append(end)
        end += launch.cdiv(n, 256) * 256
    return offsets, end


def _run_fp16x3(p, a, b, c, bias, scale):
    """fp16x3: the operands' pieces (A's rows, B's columns) in one workspace allocation, their
    tensor maps, the GEMM and, for split-K, the reduction. One allocation instead of five (a
    tensor per piece pair, exponent and magnitude array): a call's host time 94-102 -> 63-70 us
    at 256^3, 111-117 -> 81-85 us at 1024^3 (H100 machine, session 16,
    benchmarks/results/host_fp16x3_workspace_session16.log)."""
    (M, K), N = a.shape, b.shape[1]
    n_major = p.b.prep == "n-major split"
    a2 = tc_operand(a, p.a)
    bt = b if n_major else tc_operand(b.t(), p.b)   # row-major (K, N) as is, or (N, K) K-major
    lda, ldb = _piece_ld(K), _piece_ld(N if n_major else K)   # pieces' rows: A's of K values, B's of N or K
    b_rows = K if n_major else N   # rows of B's pieces
    a_piece, b_piece = M * lda * 2, b_rows * ldb * 2
    (ahi, alo, ea, bhi, blo, eb, mag), total = _carve([a_piece, a_piece, 4 * M, b_piece, b_piece, 4 * N,
                                                       4 * N if n_major else 0])
    ws = torch.empty((total,), dtype=torch.uint8, device=c.device)
    base = ws.data_ptr()
    _split_rows(a2, p.a, base + ahi, base + alo, lda, base + ea)
    maps = tuple(tma.tensor_map_at(base + o, torch.float16, K, M, lda, p.bk, p.tile[0]) for o in (ahi, alo))
    if n_major:   # boxes of 64 columns (128 bytes) x bk rows of K
        ws[mag:mag + 4 * N].zero_()
        _split_columns(bt, p.b, base + mag, base + bhi, base + blo, ldb, base + eb)
        maps += tuple(tma.tensor_map_at(base + o, torch.float16, N, K, ldb, 64, p.bk) for o in (bhi, blo))
    else:
        _split_rows(bt, p.b, base + bhi, base + blo, ldb, base + eb)
        maps += tuple(tma.tensor_map_at(base + o, torch.float16, K, N, ldb, p.bk, p.tile[1]) for o in (bhi, blo))
    h = _handle(p.kernel, c.get_device())
    if p.slices > 1:
        part = torch.empty((p.slices, M, N), dtype=torch.float32, device=c.device)
        launch.launch(h, p.grid, p.block, maps + (part.data_ptr(), M, N, K, p.kslice, base + ea, base + eb), p.smem)
        _reduce(p, part, c, bias, scale)
    else:
        launch.launch(h, p.grid, p.block, maps + (c.data_ptr(), N, M, N, K, base + ea, base + eb, bias, scale), p.smem)
    del ws, a2, bt   # launched: the stream orders any reuse of this memory after the kernel


_RUNNERS = {"naive": _run_naive, "simt": _run_simt, "tc": _run_tc, "wgmma": _run_hopper, "tf32x3": _run_hopper,
            "fp16x3": _run_fp16x3}
