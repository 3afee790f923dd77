"""The GEMM plan: which family takes a problem (``choose``), its plan (``plan``, cached by
``plan_for``) and the runner (``run``). Pure but for ``plan_for``'s tensors and ``run``; the
batch layer (``batch``) and the two ops reach the families through here."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch

from ... import checks, launch
from . import epilogues, fp16x3, naive, packed, simt, tc, tf32x3, wgmma
from .common import EPILOGUES, NO_OVERRIDES, Device, GemmPlan, Matrix, Overrides
from .epilogues import NO_ARGS
from .runtime import AFTER, after_expr, after_step, device_info, handle, serial_ops
from .tables import (
    EPI_PASS_SERIAL_NS,
    EPI_PASS_SHARE,
    EPI_PASS_US,
    EPI_SERIAL_NS,
    X3_BATCH_MIN_WORK,
    X3_DEFAULT_BANDWIDTH,
    X3_GEMM_SHARE,
    X3_MACS_PER_US,
    X3H_PACKED_PASSES_US,
    X3H_PASSES_US,
    X3H_SPLIT_BYTES,
    X3H_SPLIT_SHARE,
    X3H_T_BYTES,
)

FAMILIES = {m.NAME: m for m in (naive, simt, tc, wgmma, tf32x3, fp16x3)}
# "accurate": "auto", but float32 never through TF32: at most torch fp32's error, on the fastest
# kernel that gives it (fp16x3 / tf32x3 on Hopper, simt elsewhere)
ALGOS = ("auto", "accurate") + tuple(FAMILIES)
_HOPPER = (wgmma.NAME, tf32x3.NAME, fp16x3.NAME)
PACKED_ALGOS = ("accurate", fp16x3.NAME)  # the algos that plan fp16x3, so may read a prepacked weight


def supports(family: str, M: int, N: int, K: int, dtype: torch.dtype, dev: Device) -> str | None:
    """Why ``family`` cannot compute an (M x K) @ (K x N) GEMM of ``dtype`` on ``dev`` (None: it can)."""
    return FAMILIES[family].supports(M, N, K, dtype, dev)


def x3_estimates(
    M: int, N: int, K: int, dev: Device, b_packed: bool = False, presplit: bool = True, swap: bool = False
) -> dict[str, float]:
    """The cost model's microseconds for an fp32-accurate M x K x N GEMM on Hopper ``dev``, by
    family ("tf32x3", "fp16x3"): each main loop at its rate or its operands' reading time,
    whichever is longer, plus fp16x3's split and t passes (``b_packed``: B's pieces are
    prepacked, only A is split), less what tf32x3 saves splitting A by a pass where that pays
    (``tf32x3.presplit_saves``, ``swap`` as there; ``presplit`` False: never, the override's). The
    constants and their measurement: ``tables``."""
    bw = dev.bandwidth or X3_DEFAULT_BANDWIDTH
    work, out = M * N * K, 4 * M * N

    def loop(family: str, operand_bytes: int) -> float:
        return max(work / X3_MACS_PER_US[family], (operand_bytes + out) / (X3_GEMM_SHARE * bw))

    split = X3H_SPLIT_BYTES * M * K if b_packed else X3H_SPLIT_BYTES * (M + N) * K + X3H_T_BYTES * min(M, N) * K
    passes = split / (X3H_SPLIT_SHARE * bw) + (X3H_PACKED_PASSES_US if b_packed else X3H_PASSES_US)
    # tf32x3 reads fp32 operands, fp16x3 two fp16 pieces of each: the same bytes
    saved = max(tf32x3.presplit_saves(M, N, K, dev, swap), 0.0) if presplit else 0.0
    return {"tf32x3": loop("tf32x3", 4 * (M + N) * K) - saved, "fp16x3": loop("fp16x3", 4 * (M + N) * K) + passes}


def fp32_accurate(
    M: int,
    N: int,
    K: int,
    dev: Device,
    batched: bool = False,
    b_packed: bool = False,
    presplit: bool = True,
    swap: bool = False,
) -> str:
    """The fastest fp32-accurate family for an M x K x N GEMM on Hopper ``dev``: "fp16x3" or
    "tf32x3", whichever the cost model (``x3_estimates``, ``presplit`` and ``swap`` as there)
    finishes first; ``batched`` (each entry of a batch): "simt" below X3_BATCH_MIN_WORK (its
    batched kernel in one launch; the x3 families launch once per entry, host-bound for small
    entries)."""
    if batched and M * N * K < X3_BATCH_MIN_WORK:
        return "simt"
    t = x3_estimates(M, N, K, dev, b_packed, presplit, swap)
    return "fp16x3" if t["fp16x3"] < t["tf32x3"] else "tf32x3"


def choose(
    algo: str,
    M: int,
    N: int,
    K: int,
    dtype: torch.dtype,
    dev: Device,
    tf32: bool,
    batched: bool = False,
    b_packed: bool = False,
    presplit: bool = True,
    swap: bool = False,
) -> str:
    """The kernel family for ``algo``. ``"auto"``: float16 / bfloat16 on the tensor cores
    ("wgmma" on Hopper, "tc" elsewhere); float32 the same only when torch itself would use TF32
    (``tf32``), else "simt" (full fp32); float64, or sizes the tiled kernels do not take:
    "naive". ``"accurate"``: as "auto", but float32 on the fp32-accurate kernels ("fp16x3" or
    "tf32x3" on Hopper by ``fp32_accurate``, of a batch's entries when ``batched``, with B's
    split free where ``b_packed`` and tf32x3's A split by a pass unless ``presplit`` is False,
    ``swap`` its plan's C^T = B^T A^T; else
    "simt") whatever the TF32 switch. A family by
    name: that family, or ``ValueError`` when it cannot take the problem."""
    if algo not in ("auto", "accurate"):
        checks.fits("algo", algo, supports(algo, M, N, K, dtype, dev))
        return algo
    if dtype == torch.float64 or simt.supports(M, N, K, torch.float32, dev) is not None:
        return "naive"
    if dtype == torch.float32 and algo == "accurate":
        family = fp32_accurate(M, N, K, dev, batched, b_packed, presplit, swap) if dev.has_wgmma else "simt"
        return family if supports(family, M, N, K, dtype, dev) is None else "simt"
    if dtype != torch.float32 or tf32:
        return "wgmma" if dev.has_wgmma else "tc"
    return "simt"


def after_estimates(epilogue: str, M: int, N: int, dtype: torch.dtype, dev: Device, ops: int) -> dict[str, float]:
    """The cost model's microseconds of user epilogue ``epilogue`` on an M x N output of
    ``dtype`` over the GEMM without it: "store" applied at a Hopper kernel's store, "after" by
    the pass after the GEMM; ``ops``: its code's ``serial_ops``. Each such instruction costs
    EPI_SERIAL_NS a value per SM at the store (applied one value at a time, tensor cores idle)
    and EPI_PASS_SERIAL_NS in the pass, which also reads and writes C and reads the epilogue's
    tensors (and the gradient's dy) at EPI_PASS_SHARE of the bandwidth after its launch
    (``tables``)."""
    e = epilogues.user(epilogue)
    reads = 2 + len(e.tensors) + (epilogue == e.grad_tag)
    per_sm = M * N / dev.sm_count / 1e3  # values an SM, in thousands (ns -> us)
    bw = dev.bandwidth or X3_DEFAULT_BANDWIDTH
    after = reads * dtype.itemsize * M * N / (EPI_PASS_SHARE * bw) + EPI_PASS_US + ops * per_sm * EPI_PASS_SERIAL_NS
    return {"store": ops * per_sm * EPI_SERIAL_NS, "after": after}


def epilogue_after(epilogue: str, M: int, N: int, dtype: torch.dtype, dev: Device, p: GemmPlan, ov) -> str | None:
    """Why user epilogue ``epilogue`` of plan ``p`` (an M x N output of ``dtype`` on ``dev``) is
    applied by a pass after the GEMM, or None where the kernel applies it at its store: where
    the cost model (``after_estimates``) finishes the pass first. Never where the plan's split-K
    reduction applies it (a pass already) or for a batch; ``ov.after`` True: wherever it can,
    False: never."""
    e = epilogues.user(epilogue)
    if e is None or e is epilogues.LINEAR or ov.after is False or p.reduce is not None or p.batch:
        return None
    if ov.after:
        return "epilogue by a pass after the GEMM (override)"
    if p.family not in _HOPPER:
        return None
    # (an epilogue with 8 such instructions would not pay here: its code is not compiled to count them)
    if (
        after_estimates(epilogue, M, N, dtype, dev, 8)["store"]
        <= after_estimates(epilogue, M, N, dtype, dev, 0)["after"]
    ):
        return None
    ops = serial_ops(epilogue, dtype, f"sm_{dev.capability[0]}{dev.capability[1]}")
    t = after_estimates(epilogue, M, N, dtype, dev, ops)
    if t["store"] <= t["after"]:
        return None
    return (
        f"epilogue by a pass after the GEMM: ~{t['after']:,.0f} us against ~{t['store']:,.0f} us at the store "
        f"({ops} IEEE division{'s' if ops != 1 else ''}, roots or calls in its code)"
    )


def plan(
    M: int,
    N: int,
    K: int,
    dtype: torch.dtype,
    a: Matrix,
    b: Matrix,
    epilogue: str,
    dev: Device,
    *,
    algo: str = "auto",
    tf32: bool = False,
    batch: tuple[int, int, int] | None = None,
    **overrides,
) -> GemmPlan:
    """The plan of C (M, N) = epilogue(A @ B) for A (``a``: M x K) and B (``b``: K x N) of
    ``dtype`` on ``dev`` (M, N > 0). ``algo`` picks the family (``choose``); ``tf32``: torch
    allows TF32 for fp32 matmuls now; ``batch``: ``(entries, a's batch stride, b's batch
    stride)`` for a batch of such products (C's entries M * N apart): the family's batched kernel
    where it has one and takes these operands (``plan.batch`` set), else the 2-D plan of one
    entry (``plan.batch`` 0: one launch per entry; "accurate" chooses by entry: ``choose``);
    ``overrides``: the fields of ``Overrides``.
    Pure: a CPU test can plan any problem. Raises ``ValueError`` when an explicit ``algo``
    cannot take the problem or an override is out of range."""
    if not epilogues.known(epilogue):
        raise ValueError(f"epilogue must be one of {EPILOGUES} or a declared epilogue's tag, got {epilogue!r}")
    ov = Overrides(**overrides) if overrides else NO_OVERRIDES
    # tf32x3's form for the cost model ("accurate"): its A split by a pass unless told not to, and C^T = B^T A^T
    presplit, swap = ov.presplit is not False, algo == "accurate" and tf32x3.swapped(N, ov)
    family = choose(algo, M, N, K, dtype, dev, tf32, batch is not None, ov.b_packed, presplit, swap)
    if K == 0 and family in _HOPPER:  # no tile for TMA to load: tc's kernel writes the epilogue of 0
        p = tc.plan_empty_k(M, N, K, dtype, a, b, epilogue, dev, ov)
    else:
        p = FAMILIES[family].plan(M, N, K, dtype, a, b, epilogue, dev, ov)
        after = None if batch is not None else epilogue_after(epilogue, M, N, dtype, dev, p, ov)
        if after is not None:  # the GEMM stores the Linear's output, the pass applies the epilogue
            q = FAMILIES[family].plan(M, N, K, dtype, a, b, epilogues.LINEAR.tag, dev, ov)
            p = dataclasses.replace(q, after=epilogue, notes=q.notes + (after,))
    if algo == "accurate" and K and family in (tf32x3.NAME, fp16x3.NAME):
        t = x3_estimates(M, N, K, dev, ov.b_packed, presplit, swap)
        how = ", ".join(f"{f} ~{us:,.0f} us" for f, us in t.items())
        p = dataclasses.replace(p, notes=p.notes + (f"accurate: the cost model's {how}",))
    batched = getattr(FAMILIES[p.family], "batched", None)  # (K = 0 on Hopper: tc's plan)
    if batch is not None and batched is not None:
        return batched(p, a, b, batch[1], batch[2], batch[0], epilogue, dev, ov) or p
    return p


def variants() -> dict[str, list[str]]:
    """Every kernel a plan can name, by source file (registered for the offline check)."""
    from .runtime import after_variants, reduce_variants

    out: dict[str, list[str]] = {"gemm.cu": reduce_variants() + after_variants()}
    for family in FAMILIES.values():
        for filename, exprs in family.variants().items():
            out.setdefault(filename, []).extend(exprs)
    return out


def epilogue_kernels(e: epilogues.Epilogue) -> list:
    """One ``Kernel`` per GEMM kernel template that takes an epilogue (every family's, the split-K
    reduction's and the pass after the GEMM's), instantiated for epilogue ``e`` (and its
    gradient's, where it has a derivative) at the first of its built-in variants (the naive
    kernel's in every dtype): what ``python -m cupy_ops compile FILE.py`` compiles offline to
    check a file's epilogues."""
    from .runtime import REDUCE

    tags = [e.tag] + ([e.grad_tag] if e.derivative is not None else [])
    out = []
    for kernels in [*(f.KERNELS for f in FAMILIES.values()), REDUCE, AFTER]:
        for k in kernels.values():
            builtins = [x for x in k.expressions if epilogues.tag_of(x) == epilogues.BIAS_RELU_SCALE]
            # the naive kernel in every dtype (acc_t double for float64, the 16-bit conversions)
            for builtin in builtins if k.name == "gemm_naive" else builtins[:1]:
                out.append(k.with_suffix(e.cuda(), [builtin.replace(epilogues.BIAS_RELU_SCALE, t) for t in tags]))
    return out


_allow_tf32 = getattr(torch._C, "_get_cublas_allow_tf32", None)
_precision = getattr(torch._C, "_get_float32_matmul_precision", None)


def tf32_allowed() -> bool:
    """Whether torch would use TF32 for an fp32 matmul now (the switches torch reads; read
    from torch._C where it has them: the Python properties cost ~0.6 us on every GEMM call)."""
    if _allow_tf32 is None or _precision is None:
        return torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    return _allow_tf32() or _precision() != "highest"


# Plans, and their launchers, by everything they depend on: planning costs ~20 us of Python, a
# lookup ~2 us, and the eager call of a small GEMM is host-bound (docs/design.md#host-cost).
_plans: dict[tuple, GemmPlan] = {}
_launchers: dict[tuple, Callable] = {}
_PLAN_CACHE_LIMIT = 4096


def _key(a: torch.Tensor, b: torch.Tensor, epilogue: str, algo: str, overrides: dict) -> tuple:
    """Everything a plan of ``a @ b`` depends on (``plan_for``'s cache key)."""
    return (
        a.shape,
        a.stride(),
        a.data_ptr() & 15 == 0,
        b.shape,
        b.stride(),
        b.data_ptr() & 15 == 0,
        a.dtype,
        a.get_device(),
        epilogue,
        algo,
        a.dtype == torch.float32 and tf32_allowed(),
        tuple(sorted(overrides.items())) if overrides else (),
    )


def plan_for(a: torch.Tensor, b: torch.Tensor, epilogue: str = "EpiNone", algo: str = "auto", **overrides) -> GemmPlan:
    """The plan for ``epilogue(a @ b)``: ``a`` (M, K) and ``b`` (K, N) CUDA tensors of one
    supported dtype (linear_relu_div's ``b`` is ``weight.T``), M and N > 0: the plan
    ``cupy_ops.matmul`` / ``linear_relu_div`` carry out with ``algo``; ``overrides`` (the fields
    of ``Overrides``) override its tables. A batch: ``a`` (B, M, K) and ``b`` (B, K, N) views,
    any batch strides (0: broadcast), B > 0 (``plan``'s ``batch``). Raises ``ValueError`` when
    ``algo`` cannot take them."""
    return _plan(_key(a, b, epilogue, algo, overrides), a, b, epilogue, algo, overrides)


def _plan(key: tuple, a, b, epilogue: str, algo: str, overrides: dict) -> GemmPlan:
    p = _plans.get(key)
    if p is None:
        entries = None
        if a.dim() == 3:
            entries, a, b = (a.shape[0], a.stride(0), b.stride(0)), a[0], b[0]
        p = plan(
            a.shape[0],
            b.shape[1],
            a.shape[1],
            a.dtype,
            Matrix.of(a),
            Matrix.of(b),
            epilogue,
            device_info(a.get_device()),
            algo=algo,
            tf32=key[10],
            batch=entries,
            **overrides,
        )
        if len(_plans) >= _PLAN_CACHE_LIMIT:
            _plans.clear()
        _plans[key] = p
    return p


def launcher_for(a: torch.Tensor, b: torch.Tensor, epilogue: str = "EpiNone", algo: str = "auto") -> Callable:
    """``plan_for(a, b, epilogue, algo)`` bound to the tensors' device by its family
    (``launcher``, where the family has one): ``fn(a, b, c, epi)`` runs it on tensors of the
    same shapes, strides, dtype, alignment and device, as ``run`` does (``epi`` the epilogue's
    packed arguments, ``epilogues.args``). The eager hot path of a GEMM: one lookup, then the
    family's launch."""
    key = _key(a, b, epilogue, algo, None)
    fn = _launchers.get(key)
    if fn is None:
        p = _plan(key, a, b, epilogue, algo, {})
        family = FAMILIES[p.family]
        make = getattr(family, "launcher", None)
        fn = make(p, a.get_device()) if make is not None else functools.partial(family.run, p)
        if p.after:
            fn = _then_after(fn, p.after, a.dtype, a.get_device())
        if len(_launchers) >= _PLAN_CACHE_LIMIT:
            _launchers.clear()
        _launchers[key] = fn
    return fn


def _then_after(fn: Callable, tag: str, dtype: torch.dtype, device: int) -> Callable:
    """Launcher ``fn`` followed by epilogue ``tag``'s pass over its output (``start`` kept), its
    handle bound once."""
    h = handle(AFTER, after_expr(dtype, tag), device)

    def go(a, b, c, epi):
        fn(a, b, c, epi)
        launch.launch(*after_step(tag, c, epi, h))

    start = getattr(fn, "start", None)
    if start is not None:

        def begin(a, b):
            finish = start(a, b)
            if finish is None:
                return None

            def end(c, epi):
                finish(c, epi)
                launch.launch(*after_step(tag, c, epi, h))

            return end

        go.start = begin
    return go


# 2-D and torch.bmm's products by signature: everything the checks and the plan read -> the
# output's shape and device, the launcher and its start (or None); None where the general path
# takes the signature (an empty output, a batch looped over). A call seen before allocates and
# launches: its checks passed for this signature, its plan is bound (docs/design.md#host-cost).
_products: dict[tuple, tuple | None] = {}
_MISSING = object()
_FLOAT32 = torch.float32


def product(a: torch.Tensor, b: torch.Tensor, algo: str, check) -> torch.Tensor | None:
    """``a @ b`` of 2-D plain tensors into a new tensor, through the signature cache: a
    signature not seen before is checked first (``check(a, b, algo, ALGOS)`` returns the
    output's shape or raises). torch.bmm's case too, 3-D operands of one batch of more than
    one entry, where the family has a batched kernel (``batch``'s "batched" mode). None for
    anything else (other ranks, a batch the family loops over, an empty output, an unhashable
    ``algo``): the caller's general path takes it."""
    if type(algo) is not str or ((a.dim() != 2 or b.dim() != 2) and not _bmm(a, b)):
        return None
    dtype = a.dtype
    key = (
        a.shape,
        a.stride(),
        b.shape,
        b.stride(),
        dtype,
        b.dtype,
        a.device,
        b.device,
        algo,
        a.data_ptr() & 15,
        b.data_ptr() & 15,
        dtype is _FLOAT32 and tf32_allowed(),
    )
    entry = _products.get(key, _MISSING)
    if entry is _MISSING:
        shape = check(a, b, algo, ALGOS)
        if len(_products) >= _PLAN_CACHE_LIMIT:
            _products.clear()
        if shape[-2] * shape[-1] == 0 or (len(shape) == 3 and not plan_for(a, b, "EpiNone", algo).batch):
            entry = None
        else:
            fn = launcher_for(a, b, "EpiNone", algo)
            entry = (shape, a.device, fn, getattr(fn, "start", None))
        _products[key] = entry
    if entry is None:
        return None
    return _into(entry[2], entry[3], a, b, entry[0], dtype, entry[1], NO_ARGS)


def _bmm(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.bmm's case: (B, M, K) @ (B, K, N) with B > 1 (``batch.run`` takes it alike)."""
    return a.dim() == 3 and b.dim() == 3 and a.shape[0] == b.shape[0] > 1


def _into(fn, start, a, b, shape, dtype, device, epi: tuple, rows: int | None = None) -> torch.Tensor:
    """A new output of ``shape``, ``fn(a, b, c, epi)`` run into it (``c`` the output, or its
    view of ``rows`` rows): where the launcher has a ``start`` (fp16x3.launcher), its first
    kernel is issued before the output is allocated, while the GPU works."""
    finish = None if start is None else start(a, b)
    # (sizes as separate ints: torch parses a tuple 1-2 us slower, docs/design.md#host-cost; never 0-D here)
    out = torch.empty(*shape, dtype=dtype, device=device)
    c = out if rows is None else out.view(rows, shape[-1])
    if finish is None:
        fn(a, b, c, epi)
    else:
        finish(c, epi)
    return out


# Linear layers by signature: everything the caller's checks and the plan read -> the output's
# shape and device, x's rows, the launcher of x's rows @ weight.T, the caller's own part.
_layers: dict[tuple, tuple | None] = {}


def layer(x: torch.Tensor, weight: torch.Tensor, bias, epilogue: str, algo, extra: tuple, check) -> tuple | None:
    """The entry of ``epilogue(F.linear(x, weight, bias))`` by its signature (shapes, strides,
    dtypes, devices, 16-byte alignment of x and weight, the epilogue, algo, the TF32 switch,
    ``extra``: the signature of whatever else ``check`` reads). A signature not seen before is
    checked first: ``check()`` returns ``(output shape, part)`` or raises, ``part`` being the
    caller's (None: not this path). The entry is ``(shape, device, M, fold, launcher, part,
    start)``: ``launcher(x2, weight.T, out2, epi)`` runs the GEMM of ``x2`` = x's M rows
    (``fold``: a view ``x.view(M, K)``, else x itself) into the output folded alike (``start``:
    the launcher's own, or None). None where the general path
    takes the call: an unhashable algo, an empty output or K = 0, rows that are no view of x, a
    bias with a stride, a prepacked weight (docs/prepack.md), a tensor without strides."""
    if type(algo) is not str:
        return None
    dtype = x.dtype
    if dtype is _FLOAT32 and algo in PACKED_ALGOS and packed.lookup(weight) is not None:
        return None
    try:
        key = (
            x.shape,
            x.stride(),
            weight.shape,
            weight.stride(),
            dtype,
            weight.dtype,
            x.get_device(),
            weight.get_device(),
            # (an index is no device: another backend's tensor must not match a CUDA signature)
            x.is_cuda and weight.is_cuda and (bias is None or bias.is_cuda),
            None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.get_device()),
            epilogue,
            algo,
            extra,
            x.data_ptr() & 15,
            weight.data_ptr() & 15,
            dtype is _FLOAT32 and tf32_allowed(),
        )
    except RuntimeError:  # no strides or storage (sparse, mkldnn): the general path's errors
        return None
    entry = _layers.get(key, _MISSING)
    if entry is _MISSING:
        shape, part = check()
        entry = None
        K, M = x.shape[-1], checks.prod(shape[:-1])
        if part is not None and M * shape[-1] * K and (bias is None or bias.stride(0) == 1):
            fold = x.dim() != 2
            try:
                x2 = x.view(M, K) if fold else x
            except RuntimeError:  # x's rows are no view: the general path copies them
                x2 = None
            if x2 is not None:
                fn = launcher_for(x2, weight.t(), epilogue, algo)
                entry = (shape, x.device, M, fold, fn, part, getattr(fn, "start", None))
        if len(_layers) >= _PLAN_CACHE_LIMIT:
            _layers.clear()
        _layers[key] = entry
    return entry


def run_layer(entry: tuple, x: torch.Tensor, weight: torch.Tensor, epi: tuple) -> torch.Tensor:
    """The output of a ``layer`` entry's call: allocated, and its GEMM launched with the
    epilogue's packed arguments ``epi`` (``epilogues.args``)."""
    shape, device, M, fold, run, _, start = entry
    if fold:
        return _into(run, start, x.view(M, x.shape[-1]), weight.t(), shape, x.dtype, device, epi, M)
    return _into(run, start, x, weight.t(), shape, x.dtype, device, epi)


def clear() -> None:
    """Forget every plan, launcher and product signature (they are planned again on their next
    call): after a change to what they were built from that their key does not hold, e.g.
    the tables."""
    _plans.clear()
    _launchers.clear()
    _products.clear()
    _layers.clear()


def run(
    p: GemmPlan,
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    bias: torch.Tensor | None = None,
    scale: float = 1.0,
    *,
    epi: tuple | None = None,
) -> torch.Tensor:
    """``c`` (M, N, contiguous) = epilogue(``a @ b``) as plan ``p`` says; ``bias`` (N,)
    contiguous or None and ``scale`` feed a built-in epilogue (ignored by ``EpiNone``), ``epi``
    (``epilogues.args``) any epilogue in their place. A batched plan (``p.batch``): ``a`` (B, M,
    K), ``b`` (B, K, N), ``c`` (B, M, N) contiguous."""
    if epi is None:
        epi = epilogues.builtin_args(0 if bias is None else bias.data_ptr(), float(scale))
    FAMILIES[p.family].run(p, a, b, c, epi)
    if p.after:
        launch.launch(*after_step(p.after, c, epi))
    return c
