"""The benchmark's tables: the text table of a run (``format_rows``) and README's Markdown
tables (``format_markdown``: the matrix ops' or the elementwise ops'), with times that spread
marked "~"."""

from __future__ import annotations

import textwrap

from .cases import COMPILED, CUBLAS, EAGER, ELEMENTWISE, GEMM_PROBLEMS, OURS, Row, Variant
from .timing import Stats

# A time whose 80th percentile is more than SPREAD_FLAG x its 20th is marked "~" in the tables:
# the GPU's speed changed during its runs (clocks, another process, a slow host), so its median
# and the ratios built on it are less sure. Whole-bench runs on an H100: on a quiet machine 2
# of 136 times spread more than 1.25x (median spread 1.025x), on a noisy one 12 (up to 3.4x); a
# row whose torch eager time is marked has its "vs eager" ratio marked too.
SPREAD_FLAG = 1.25
SPREAD_NOTE = (
    f"~ p80 / p20 above {SPREAD_FLAG}x (this time, or torch eager's for the ratio): the GPU's speed "
    "changed during its runs; re-run before quoting it"
)

# Datasheet dense peak TFLOP/s per GPU (name as torch reports it) and dtype, for "% peak";
# H100 SXM and H200 have the same GH100 compute. A GPU not listed gets "-".
PEAK_TFLOPS = {
    "H100 80GB HBM3": {"float32": 67, "tf32": 495, "bfloat16": 989, "float16": 989},
    "H200": {"float32": 67, "tf32": 495, "bfloat16": 989, "float16": 989},
}
# The families README's float32 rows choose among: fp32 accuracy (what algo="accurate" and the
# ModelNews choose among)
FP32_ACCURATE = ("fp16x3", "tf32x3", "simt")


def spread(s: Stats | None) -> bool:
    """Whether ``s`` spread more than SPREAD_FLAG between its 20th and 80th percentiles."""
    return s is not None and s.p20 > 0 and s.p80 / s.p20 > SPREAD_FLAG


def _mark(text: str, *stats: Stats | None) -> str:
    return text + (" ~" if any(spread(s) for s in stats) else "")


def _ratio(a: Stats | None, b: Stats | None) -> str:
    return f"{b.median / a.median:.2f}x" if a and b else "-"


def _stats(v: Variant | None) -> Stats | None:
    return v.stats if v is not None and v.ran else None


def format_rows(rows: list[Row]) -> str:
    """One line per (case, variant): ms, GB/s, % of copy or TFLOP/s, speedups, error."""
    head = (
        "problem",
        "dtype",
        "shape",
        "variant",
        "ms",
        "GB/s",
        "%copy",
        "TFLOP/s",
        "vs eager",
        "vs compile",
        "max err",
        "exact",
    )
    lines = [head]
    for r in rows:
        es, cs = _stats(r.of_kind(EAGER)), _stats(r.of_kind(COMPILED))
        for v in r.variants:
            if v.error:
                lines.append((r.problem, r.dtype, r.shape, v.name, "ERROR", v.error[:60], "", "", "", "", "", ""))
                continue
            ms = v.stats.median
            gbs = r.bytes / ms / 1e6
            pct = f"{100 * r.copy.median / ms:.1f}" if r.copy else "-"
            tflops = f"{r.flops / ms / 1e9:.1f}" if r.flops else "-"
            lines.append(
                (
                    r.problem,
                    r.dtype,
                    r.shape + (" *" if r.scaled_from else ""),
                    v.name,
                    _mark(f"{ms:.4f}", v.stats),
                    f"{gbs:.0f}",
                    pct,
                    tflops,
                    _mark(_ratio(v.stats, es), v.stats, es) if es else "-",
                    _mark(_ratio(v.stats, cs), v.stats, cs) if cs else "-",
                    f"{v.max_abs_error:.1e}",
                    "yes" if v.bitwise_equal else "no",
                )
            )
        if r.copy:
            lines.append(
                (
                    r.problem,
                    r.dtype,
                    r.shape,
                    "(d2d copy)",
                    f"{r.copy.median:.4f}",
                    f"{r.bytes / r.copy.median / 1e6:.0f}",
                    "100.0",
                    "-",
                    "",
                    "",
                    "",
                    "",
                )
            )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    if any(r.scaled_from for r in rows):
        out.append(
            "* scaled down to fit GPU memory: "
            + ", ".join(f"{r.problem} {r.dtype} {r.scaled_from} -> {r.shape}" for r in rows if r.scaled_from)
        )
    if any(" ~" in str(c) for line in lines for c in line):
        out.append(SPREAD_NOTE)
    return "\n".join(out)


def _peaks(gpu: str | None) -> dict | None:
    return next((peaks for name, peaks in PEAK_TFLOPS.items() if gpu and name in gpu), None)


def _variant_text(problem: str, v: Variant) -> str:
    """README's wording of a variant: "cupy_ops fused wgmma (auto)" -> "fused (wgmma; auto)"."""
    if v.kind == CUBLAS:
        return "cuBLAS + `relu_div`"
    family = f"{v.family}; auto" if v.auto else str(v.family)
    return f"`matmul` ({family})" if problem == "matmul" else f"fused ({family})"


def _ms(ms: float) -> str:
    return f"{ms:.4f}" if ms < 100 else f"{ms:.1f}"


def _where(env: dict) -> str:
    """ "NVIDIA H100 80GB HBM3, commit ba22bcd (2026-11-27)": the GPU and the runs of a table."""
    runs = env.get("runs") or [(env.get("commit"), env.get("date"))]
    text = ", ".join(f"{c} ({d})" if d else str(c) for c, d in runs)
    return f"{env.get('gpu')}, commit{'s' if len(runs) > 1 else ''} {text}"


def headline(row: Row) -> Variant | None:
    """README's one variant of a GEMM case: for float32 the fastest of the ``FP32_ACCURATE``
    families, else the family ``"auto"`` picks; None where it did not run."""
    ran = [v for v in row.variants if v.ran and v.kind == OURS]
    if row.dtype == "float32":
        return min((v for v in ran if v.family in FP32_ACCURATE), key=lambda v: v.stats.median, default=None)
    return next((v for v in ran if v.auto), None)


def format_gemm_markdown(rows: list[Row], env: dict) -> str:
    """README's matrix-ops table, under a line saying where it was measured (``env``: gpu,
    commit, date, or ``runs``: [(commit, date)]): one line per GEMM case, its ``headline``
    variant; "% peak" of the GPU's datasheet peak for the dtype (``PEAK_TFLOPS``); "~" as in
    ``format_rows``. The other variants: docs/benchmarks.md."""
    gpu = env.get("gpu")
    order = {p: i for i, p in enumerate(GEMM_PROBLEMS)}
    dtypes = {d: i for i, d in enumerate(("float32", "bfloat16", "float16", "tf32"))}
    cases = sorted(
        (r for r in rows if r.problem in order),
        key=lambda r: (order[r.problem], dtypes.get(r.dtype, len(dtypes)), -r.flops),
    )
    table = [
        "| problem | dtype | shape (MxKxN) | cupy_ops | ms | TFLOP/s | % peak | torch eager ms | vs torch |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    peaks = _peaks(gpu)
    for r in cases:
        es = _stats(r.of_kind(EAGER))
        peak = peaks.get(r.dtype) if peaks else None
        for v in filter(None, [headline(r)]):
            ms = v.stats.median
            tflops = r.flops / ms / 1e9
            table.append(
                "| "
                + " | ".join(
                    [
                        r.problem,
                        r.dtype,
                        r.shape,
                        _variant_text(r.problem, v),
                        _mark(_ms(ms), v.stats),
                        f"{tflops:.1f}",
                        f"{100 * tflops / peak:.0f}" if peak else "-",
                        _mark(_ms(es.median), es) if es else "-",
                        _mark(_ratio(v.stats, es), v.stats, es) if es else "-",
                    ]
                )
                + " |"
            )
    head = (
        f"{_where(env)}; float32: the fastest at fp32 accuracy (fp16x3 or tf32x3 on the tensor "
        'cores, or simt: `algo="accurate"` chooses among them), against torch fp32; `tf32`: float32 with TF32 '
        'allowed for both; 16-bit: what `algo="auto"` picks'
    )
    if peaks:
        head += (
            f'; "% peak" of the dtype\'s dense peak ({peaks["float32"]} TFLOP/s fp32, {peaks["tf32"]} TF32, '
            f"{peaks['bfloat16']} bf16 / fp16)"
        )
    head += "."
    if any(" ~" in line for line in table):
        head += f" `~`{SPREAD_NOTE[1:]}."
    # wrapped as README's prose is
    head = textwrap.fill(head, width=100, break_long_words=False, break_on_hyphens=False)
    return "\n".join([head, "", *table])


def format_elementwise_markdown(rows: list[Row]) -> str:
    """README's elementwise table: one line per (case, cupy_ops variant), torch eager and
    torch.compile beside it, the share of a device-to-device copy's bandwidth."""
    out = [
        "| problem | dtype | shape | cupy_ops variant | ms | torch eager ms | torch.compile ms | "
        "% of copy BW | TFLOP/s | vs eager | vs compile | exact |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.problem not in ELEMENTWISE:
            continue
        es, cs = _stats(r.of_kind(EAGER)), _stats(r.of_kind(COMPILED))
        for v in r.variants:
            if v.kind in (EAGER, COMPILED) or not v.ran:
                continue
            ms = v.stats.median
            out.append(
                "| "
                + " | ".join(
                    [
                        r.problem,
                        r.dtype,
                        r.shape,
                        v.name,
                        _mark(f"{ms:.4f}", v.stats),
                        _mark(f"{es.median:.4f}", es) if es else "-",
                        _mark(f"{cs.median:.4f}", cs) if cs else "-",
                        f"{100 * r.copy.median / ms:.1f}" if r.copy else "-",
                        f"{r.flops / ms / 1e9:.1f}" if r.flops else "-",
                        _mark(_ratio(v.stats, es), v.stats, es) if es else "-",
                        _mark(_ratio(v.stats, cs), v.stats, cs) if cs else "-",
                        "yes" if v.bitwise_equal else f"max err {v.max_abs_error:.1e}",
                    ]
                )
                + " |"
            )
    return "\n".join(out)


def format_markdown(rows: list[Row], env: dict) -> str:
    """The README table of ``rows`` (``--markdown``): the matrix-ops table when they hold a
    GEMM case, else the elementwise one (``--problem`` picks the cases)."""
    if any(r.problem in GEMM_PROBLEMS for r in rows):
        return format_gemm_markdown(rows, env)
    return format_elementwise_markdown(rows)
