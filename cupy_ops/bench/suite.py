"""The benchmark suite behind ``python -m cupy_ops.bench``.

Each case is one (problem, dtype, size). For each, every variant (cupy_ops kernels, torch
eager, ``torch.compile``) is timed the KernelBench way in this process on the same inputs:
CUDA events, warm-up, an L2 flush before every run, median (p20/p80 kept). Bandwidth-bound
rows also time a device-to-device copy of the same bytes, the practical roofline. Bytes and
FLOPs are counted explicitly (the minimum traffic: each input read once, each output written
once).
"""
from __future__ import annotations

import sys
import textwrap
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import cupy_ops

from .env import describe, environment  # noqa: F401  (used by __main__)
from .timing import Stats, time_cuda, time_cuda_interleaved

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "tf32": torch.float32}   # tf32: float32 GEMMs with TF32 allowed (torch and cupy_ops alike)

# (rows, cols) per elementwise size; the last is KernelBench's ReLU size.
ELEMENTWISE_SHAPES = [(1, 4096), (1024, 1024), (1024, 8192), (4096, 16384), (4096, 393216)]
ELEMENTWISE_QUICK = [(1, 4096), (1024, 8192), (4096, 65536)]
# (M, K, N) per GEMM size; the last 2-D one is KernelBench's. (B, M, K, N): a batch, matmul's
# a (B, M, K) @ b (B, K, N) (torch.bmm's work: attention-like, and 4096^3 in 8 products), and
# linear_relu_div's x (B, M, K) (a transformer's activations) with one weight (N, K).
LINEAR_SHAPES = [(256, 1024, 1024), (1024, 8192, 8192), (8, 512, 4096, 4096)]
MATMUL_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (32, 1024, 128, 1024), (8, 2048, 2048, 2048)]
GEMM_QUICK = [(256, 1024, 1024)]


@dataclass
class Variant:
    name: str
    stats: Stats | None = None
    max_abs_error: float | None = None
    bitwise_equal: bool | None = None
    error: str | None = None


@dataclass
class Row:
    problem: str
    dtype: str
    shape: str
    bytes: int
    flops: int
    scaled_from: str | None = None
    variants: list[Variant] = field(default_factory=list)
    copy: Stats | None = None

    def get(self, name: str) -> Variant | None:
        return next((v for v in self.variants if v.name == name), None)


def _elementwise_case(problem, shape, dtype, device):
    x = torch.randn(shape, device=device, dtype=dtype)
    if problem == "relu":
        ours = {"cupy_ops": lambda: cupy_ops.relu(x)}
        ref = lambda: torch.relu(x)  # noqa: E731
    else:
        ours = {"cupy_ops": lambda: cupy_ops.relu_div(x, 2.0)}
        ref = lambda: torch.relu(x) / 2.0  # noqa: E731
    nbytes = 2 * x.numel() * x.element_size()
    out = torch.empty_like(x)
    return ours, ref, nbytes, 0, (lambda: out.copy_(x))


def gemm_algos(a: torch.Tensor, b: torch.Tensor) -> list[str]:
    """The GEMM kernel families to time for ``a @ b`` (under the current TF32 switch): the one
    "auto" picks first, then every other family this GPU runs for the dtype (the naive
    reference last), as ``cupy_ops.gemm_plan`` says."""
    auto = cupy_ops.gemm_plan(a, b).family
    # the TF32 kernels are timed for float32 only where TF32 is allowed; without it, the
    # fp32-accurate ones: fp16x3 and 3xTF32 (Hopper) and the CUDA-core kernel
    tf32 = a.dtype != torch.float32 or torch.backends.cuda.matmul.allow_tf32
    others = []
    for algo in ("wgmma", "tc", "naive") if tf32 else ("fp16x3", "tf32x3", "simt", "naive"):
        try:
            if algo != auto and cupy_ops.gemm_plan(a, b, algo=algo).family == algo:
                others.append(algo)
        except ValueError:   # this family does not take the dtype or this GPU
            pass
    return [auto] + others


def _gemm_case(problem, mkn, dtype, dname, device):
    *B, M, K, N = mkn   # B: () or (batch,)
    count = B[0] if B else 1
    if problem == "matmul":
        a = torch.randn(*B, M, K, device=device, dtype=dtype)
        b = torch.randn(*B, K, N, device=device, dtype=dtype)
        algos = gemm_algos(a, b)
        label = {al: al + (" (auto)" if i == 0 else "") for i, al in enumerate(algos)}
        ours = {f"cupy_ops {label[al]}": (lambda al=al: cupy_ops.matmul(a, b, algo=al)) for al in algos}
        ref = lambda: torch.matmul(a, b)  # noqa: E731
        nbytes = count * (M * K + K * N + M * N) * a.element_size()
    else:
        x = torch.randn(*B, M, K, device=device, dtype=dtype)
        w = torch.randn(N, K, device=device, dtype=dtype) / K**0.5
        b = torch.randn(N, device=device, dtype=dtype)
        algos = gemm_algos(x, w.t())
        label = {al: al + (" (auto)" if i == 0 else "") for i, al in enumerate(algos)}
        ours = {"cuBLAS + cupy_ops.relu_div": lambda: cupy_ops.relu_div(F.linear(x, w, b), 2.0)}
        ours.update({f"cupy_ops fused {label[al]}": (lambda al=al: cupy_ops.linear_relu_div(x, w, b, 2.0, algo=al))
                     for al in algos})
        ref = lambda: torch.relu(F.linear(x, w, b)) / 2.0  # noqa: E731
        nbytes = (count * M * K + N * K + N + count * M * N) * x.element_size()
    return ours, ref, nbytes, 2 * count * M * N * K, None


def cases(problems, dtypes, quick: bool):
    for problem in problems:
        for dname in dtypes:
            if problem in ("relu", "relu_div"):
                if dname == "tf32":
                    continue
                for shape in (ELEMENTWISE_QUICK if quick else ELEMENTWISE_SHAPES):
                    yield problem, dname, shape
            else:
                shapes = GEMM_QUICK if quick else (LINEAR_SHAPES if problem == "linear_relu_div" else MATMUL_SHAPES)
                for mkn in shapes:
                    yield problem, dname, mkn


def _fit(problem, size, itemsize):
    """Scale an elementwise size's rows down when GPU memory is short (input, 4 outputs, flush)."""
    if problem not in ("relu", "relu_div"):
        return size, None
    rows, cols = size
    free, _ = torch.cuda.mem_get_info()
    per_row = 5 * cols * itemsize
    fits = int((free * 0.85 - 2**29) // per_row)
    if fits >= rows:
        return size, None
    return (max(1, fits), cols), f"{rows}x{cols}"


def run_case(problem, dname, size, *, compile_too: bool, runs: int, max_seconds: float, device="cuda") -> Row:
    dtype = DTYPES[dname]
    itemsize = torch.empty((), dtype=dtype).element_size()
    size, scaled_from = _fit(problem, size, itemsize)
    torch.manual_seed(0)
    tf32_before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    try:
        if problem in ("relu", "relu_div"):
            ours, ref, nbytes, flops, copy = _elementwise_case(problem, size, dtype, device)
            shape = f"{size[0]}x{size[1]}"
        else:
            ours, ref, nbytes, flops, copy = _gemm_case(problem, size, dtype, dname, device)
            # a batch of B products: "B*(MxKxN)"
            shape = "x".join(map(str, size[-3:])) if len(size) == 3 else f"{size[0]}*({'x'.join(map(str, size[1:]))})"
        row = Row(problem, dname, shape, nbytes, flops, scaled_from)
        _time_variants(row, ours, ref, copy, compile_too, runs, max_seconds)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32_before
    torch.cuda.empty_cache()
    return row


_COPY = object()   # the copy baseline's key among the functions timed together


def _time_variants(row, ours, ref, copy, compile_too, runs, max_seconds):
    with torch.no_grad():
        expected = ref()
        fns = dict(ours)
        fns["torch eager"] = ref
        if compile_too:
            torch._dynamo.reset()
            fns["torch.compile"] = torch.compile(ref, dynamic=False)
        timed = {}
        for name, fn in fns.items():
            v = Variant(name)
            try:
                got = fn()
                v.max_abs_error = float((got.float() - expected.float()).abs().nan_to_num(nan=float("inf")).max()) \
                    if got.numel() else 0.0
                v.bitwise_equal = bool(torch.equal(got, expected))
                del got
                timed[name] = fn
            except Exception as exc:  # noqa: BLE001  (a failing variant is reported, not fatal)
                v.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            row.variants.append(v)
        del expected
        if copy is not None:
            timed[_COPY] = copy
        # all variants (and the copy) in interleaved rounds: the ratios of one row are taken
        # under the same GPU conditions
        try:
            stats = time_cuda_interleaved(timed, runs=runs, max_seconds=max_seconds)
        except Exception:  # noqa: BLE001  (find the variant that fails, time the others)
            stats = {}
            for name, fn in timed.items():
                try:
                    stats[name] = time_cuda(fn, runs=runs, max_seconds=max_seconds)
                except Exception as exc:  # noqa: BLE001
                    stats[name] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        for v in row.variants:
            if isinstance(stats.get(v.name), Stats):
                v.stats = stats[v.name]
            elif v.name in stats:
                v.error = stats[v.name]
        row.copy = stats.get(_COPY) if isinstance(stats.get(_COPY), Stats) else None


# GPU work before the first timed case, so that it runs at the clocks the later ones see: a
# fresh H100 machine idles at 345 MHz, and the first rows of a bench started on one spread 3x
# (torch fp32 1024^3: p20 0.086 ms, p80 0.239).
SPIN_UP_SECONDS = 2.0


def spin_up(seconds: float = SPIN_UP_SECONDS, device="cuda") -> None:
    """Keep the GPU busy with matrix products for ``seconds`` (untimed)."""
    a = torch.randn(2048, 2048, device=device)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            a = torch.tanh(a @ a)
        torch.cuda.synchronize(device)


def run(problems, dtypes, *, quick=False, compile_too=True, runs=100, max_seconds=3.0, log=None) -> list[Row]:
    todo = list(cases(problems, dtypes, quick))
    spin_up()
    rows = []
    for i, (problem, dname, size) in enumerate(todo, 1):
        if log:
            log(f"[{i}/{len(todo)}] {problem} {dname} {size} ...")
        rows.append(run_case(problem, dname, size, compile_too=compile_too, runs=runs, max_seconds=max_seconds))
    return rows


def _ratio(a: Stats | None, b: Stats | None) -> str:
    return f"{b.median / a.median:.2f}x" if a and b else "-"


# A time whose 80th percentile is more than SPREAD_FLAG x its 20th is marked "~" in the tables:
# the GPU's speed changed during its runs (clocks, another process, a slow host), so its median
# and the ratios built on it are less sure. Whole-bench runs on an H100: on a quiet machine 2
# of 136 times spread more than 1.25x (median spread 1.025x), on a noisy one 12 (up to 3.4x); a
# row whose torch eager time is marked has its "vs eager" ratio marked too.
SPREAD_FLAG = 1.25
SPREAD_NOTE = (f"~ p80 / p20 above {SPREAD_FLAG}x (this time, or torch eager's for the ratio): the GPU's speed "
               "changed during its runs; re-run before quoting it")


def spread(s: Stats | None) -> bool:
    """Whether ``s`` spread more than SPREAD_FLAG between its 20th and 80th percentiles."""
    return s is not None and s.p20 > 0 and s.p80 / s.p20 > SPREAD_FLAG


def _mark(text: str, *stats: Stats | None) -> str:
    return text + (" ~" if any(spread(s) for s in stats) else "")


def format_rows(rows: list[Row]) -> str:
    """One line per (case, cupy_ops variant): ms, GB/s, % of copy or TFLOP/s, speedups, error."""
    head = ("problem", "dtype", "shape", "variant", "ms", "GB/s", "%copy", "TFLOP/s", "vs eager", "vs compile",
            "max err", "exact")
    lines = [head]
    for r in rows:
        eager, comp = r.get("torch eager"), r.get("torch.compile")
        for v in r.variants:
            if v.error:
                lines.append((r.problem, r.dtype, r.shape, v.name, "ERROR", v.error[:60], "", "", "", "", "", ""))
                continue
            ms = v.stats.median
            gbs = r.bytes / ms / 1e6
            pct = f"{100 * r.copy.median / ms:.1f}" if r.copy else "-"
            tflops = f"{r.flops / ms / 1e9:.1f}" if r.flops else "-"
            es = eager.stats if eager else None
            cs = comp.stats if comp and not comp.error else None
            lines.append((r.problem, r.dtype, r.shape + (" *" if r.scaled_from else ""), v.name,
                          _mark(f"{ms:.4f}", v.stats), f"{gbs:.0f}", pct, tflops,
                          _mark(_ratio(v.stats, es), v.stats, es) if es else "-",
                          _mark(_ratio(v.stats, cs), v.stats, cs) if cs else "-",
                          f"{v.max_abs_error:.1e}", "yes" if v.bitwise_equal else "no"))
        if r.copy:
            lines.append((r.problem, r.dtype, r.shape, "(d2d copy)", f"{r.copy.median:.4f}",
                          f"{r.bytes / r.copy.median / 1e6:.0f}", "100.0", "-", "", "", "", ""))
    widths = [max(len(str(l[i])) for l in lines) for i in range(len(head))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(l, widths)).rstrip() for l in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    if any(r.scaled_from for r in rows):
        out.append("* scaled down to fit GPU memory: " + ", ".join(f"{r.problem} {r.dtype} {r.scaled_from} -> {r.shape}"
                                                                    for r in rows if r.scaled_from))
    if any(" ~" in str(c) for l in lines for c in l):
        out.append(SPREAD_NOTE)
    return "\n".join(out)


def _plotted(row: Row, variant: Variant) -> bool:
    """The variants a reader compares with torch: the one each call takes by default (the
    elementwise kernel, the GEMM family "auto" picks), and the ModelNew ones: fp16x3 and 3xTF32
    (fp32 on Hopper) and cuBLAS + relu_div."""
    if variant.error or not variant.stats:
        return False
    if row.problem in ("relu", "relu_div"):
        return variant.name == "cupy_ops"
    return ("(auto)" in variant.name or "tf32x3" in variant.name or "fp16x3" in variant.name
            or variant.name.startswith("cuBLAS"))


def plot(rows: list[Row], path: str | None, title: str):
    """Speedup vs torch eager by size: elementwise ops by bytes moved (left), 2-D GEMMs by FLOPs
    (right; a batch's FLOPs are not one GEMM's size: the batched cases are in the tables only),
    one line per op, dtype and variant (the default kernel, and cuBLAS + relu_div).
    Saved to ``path`` (a PNG) when given; returns the matplotlib figure (shown inline in a
    notebook; without a display matplotlib draws off-screen)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), sharey=True)
    panels = {0: {}, 1: {}}
    for r in rows:
        eager = r.get("torch eager")
        if not eager or not eager.stats or "*" in r.shape:
            continue
        gemm = r.problem not in ("relu", "relu_div")
        for v in r.variants:
            if _plotted(r, v):
                label = f"{r.problem} {r.dtype}" + ("" if not gemm else f", {v.name.replace('cupy_ops ', '')}")
                panels[int(gemm)].setdefault(label, []).append((r.flops if gemm else r.bytes,
                                                                eager.stats.median / v.stats.median))
    markers = "osD^v<>pX*h"
    for ax, (i, series) in zip(axes, panels.items()):
        for k, (label, pts) in enumerate(sorted(series.items())):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[k % len(markers)], label=label,
                    linestyle="-" if "cuBLAS" not in label else "--")
        ax.set_xscale("log")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("bytes moved" if i == 0 else "FLOPs")
        ax.set_title("elementwise ops" if i == 0 else "GEMMs (float32: CUDA cores or 3xTF32; tf32 / 16-bit: tensor cores)",
                     fontsize=10)
        ax.legend(fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("speedup vs torch eager (higher is better)")
    fig.suptitle(title)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
    return fig


def log_stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


ELEMENTWISE = ("relu", "relu_div")
GEMM_PROBLEMS = ("matmul", "linear_relu_div")

# Datasheet dense peak TFLOP/s per GPU (name as torch reports it) and dtype, for "% peak";
# H100 SXM and H200 have the same GH100 compute. A GPU not listed gets "-".
PEAK_TFLOPS = {"H100 80GB HBM3": {"float32": 67, "tf32": 495, "bfloat16": 989, "float16": 989},
               "H200": {"float32": 67, "tf32": 495, "bfloat16": 989, "float16": 989}}


def _peak(gpu: str | None, dtype: str) -> float | None:
    return next((peaks.get(dtype) for name, peaks in PEAK_TFLOPS.items() if gpu and name in gpu), None)


def _variant_text(problem: str, name: str) -> str:
    """README's wording of a variant: "cupy_ops fused wgmma (auto)" -> "fused (wgmma; auto)"."""
    if name.startswith("cuBLAS"):
        return "cuBLAS + `relu_div`"
    family = name.replace("cupy_ops", "").replace("fused", "").strip().replace(" (auto)", "; auto")
    return f"`matmul` ({family})" if problem == "matmul" else f"fused ({family})"


def _ms(ms: float) -> str:
    return f"{ms:.4f}" if ms < 100 else f"{ms:.1f}"


def _where(env: dict) -> str:
    """"NVIDIA H100 80GB HBM3, commit ba22bcd (2026-11-27)": the GPU and the runs of a table."""
    runs = env.get("runs") or [(env.get("commit"), env.get("date"))]
    text = ", ".join(f"{c} ({d})" if d else str(c) for c, d in runs)
    return f"{env.get('gpu')}, commit{'s' if len(runs) > 1 else ''} {text}"


def _headline(row: Row) -> Variant | None:
    """README's one variant of a GEMM case: for float32 the fastest at fp32 accuracy (fp16x3,
    tf32x3 or simt: what ``algo="accurate"`` and the ``ModelNew``s choose among), else the
    family ``"auto"`` picks; None where it did not run."""
    ran = [v for v in row.variants if not v.error and v.stats]
    if row.dtype == "float32":
        ran = [v for v in ran if "tf32x3" in v.name or "fp16x3" in v.name or "simt" in v.name]
        return min(ran, key=lambda v: v.stats.median, default=None)
    return next((v for v in ran if "(auto)" in v.name), None)


def format_gemm_markdown(rows: list[Row], env: dict) -> str:
    """README's matrix-ops table, under a line saying where it was measured (``env``: gpu,
    commit, date, or ``runs``: [(commit, date)]): one line per GEMM case, its ``_headline``
    variant; "% peak" of the GPU's datasheet peak for the dtype (``PEAK_TFLOPS``); "~" as in
    ``format_rows``. The other variants: docs/benchmarks.md."""
    gpu = env.get("gpu")
    order = {p: i for i, p in enumerate(GEMM_PROBLEMS)}
    dtypes = {d: i for i, d in enumerate(("float32", "bfloat16", "float16", "tf32"))}
    cases = sorted((r for r in rows if r.problem in order),
                   key=lambda r: (order[r.problem], dtypes.get(r.dtype, len(dtypes)), -r.flops))
    table = ["| problem | dtype | shape (MxKxN) | cupy_ops | ms | TFLOP/s | % peak | torch eager ms | vs torch |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in cases:
        eager = r.get("torch eager")
        es = eager.stats if eager and eager.stats else None
        peak = _peak(gpu, r.dtype)
        for v in filter(None, [_headline(r)]):
            ms = v.stats.median
            tflops = r.flops / ms / 1e9
            table.append("| " + " | ".join([
                r.problem, r.dtype, r.shape, _variant_text(r.problem, v.name), _mark(_ms(ms), v.stats),
                f"{tflops:.1f}", f"{100 * tflops / peak:.0f}" if peak else "-",
                _mark(_ms(es.median), es) if es else "-",
                _mark(_ratio(v.stats, es), v.stats, es) if es else "-"]) + " |")
    peaks = next((p for name, p in PEAK_TFLOPS.items() if gpu and name in gpu), None)
    head = (f"{_where(env)}; float32: the fastest at fp32 accuracy (fp16x3 or tf32x3 on the tensor "
            "cores, or simt: `algo=\"accurate\"` chooses among them), against torch fp32; `tf32`: float32 with TF32 allowed for both; 16-bit: what "
            "`algo=\"auto\"` picks")
    if peaks:
        head += (f"; \"% peak\" of the dtype's dense peak ({peaks['float32']} TFLOP/s fp32, {peaks['tf32']} TF32, "
                 f"{peaks['bfloat16']} bf16 / fp16)")
    head += "."
    if any(" ~" in line for line in table):
        head += f" `~`{SPREAD_NOTE[1:]}."
    # wrapped as README's prose is
    head = textwrap.fill(head, width=100, break_long_words=False, break_on_hyphens=False)
    return "\n".join([head, ""] + table)


def format_elementwise_markdown(rows: list[Row]) -> str:
    """README's elementwise table: one line per (case, cupy_ops variant), torch eager and
    torch.compile beside it, the share of a device-to-device copy's bandwidth."""
    out = ["| problem | dtype | shape | cupy_ops variant | ms | torch eager ms | torch.compile ms | "
           "% of copy BW | TFLOP/s | vs eager | vs compile | exact |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.problem not in ELEMENTWISE:
            continue
        eager, comp = r.get("torch eager"), r.get("torch.compile")
        for v in r.variants:
            if v.name in ("torch eager", "torch.compile") or v.error or not v.stats:
                continue
            ms = v.stats.median
            es = eager.stats if eager and eager.stats else None
            cs = comp.stats if comp and comp.stats else None
            out.append("| " + " | ".join([
                r.problem, r.dtype, r.shape, v.name, _mark(f"{ms:.4f}", v.stats),
                _mark(f"{es.median:.4f}", es) if es else "-", _mark(f"{cs.median:.4f}", cs) if cs else "-",
                f"{100 * r.copy.median / ms:.1f}" if r.copy else "-",
                f"{r.flops / ms / 1e9:.1f}" if r.flops else "-",
                _mark(_ratio(v.stats, es), v.stats, es) if es else "-",
                _mark(_ratio(v.stats, cs), v.stats, cs) if cs else "-",
                "yes" if v.bitwise_equal else f"max err {v.max_abs_error:.1e}"]) + " |")
    return "\n".join(out)


def format_markdown(rows: list[Row], env: dict) -> str:
    """The README table of ``rows`` (``--markdown``): the matrix-ops table when they hold a
    GEMM case, else the elementwise one (``--problem`` picks the cases)."""
    if any(r.problem in GEMM_PROBLEMS for r in rows):
        return format_gemm_markdown(rows, env)
    return format_elementwise_markdown(rows)
