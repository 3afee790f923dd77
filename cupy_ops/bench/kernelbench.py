"""Check and time a KernelBench problem module (``cupy_ops.models.*``) the KernelBench way.

Correctness: ``torch.manual_seed(42)`` before building each model (so ``ModelNew`` must create
its parameters as ``Model`` does), then trials on KernelBench's ``torch.rand`` inputs, each
compared with ``torch.allclose(atol=rtol=tol)`` (KernelBench's check), and one on ``torch.randn``
inputs (negatives, which a copy cannot pass for ReLU), which passes when allclose holds or,
failing that, when the result is no farther from ``Model`` run in float64 than ``Model``'s own
result is (a GEMM that sums in another order than cuBLAS differs from torch by both results'
rounding errors; at K = 4096 with outputs near zero that exceeds 1e-4 even for a more accurate
result). Timing: CUDA events, warm-up, L2 flush, median; torch
eager (``Model``) timed in the same process on the same inputs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

import torch

from .timing import Stats, time_cuda

# KernelBench's tolerances: 1e-4 for fp32; 1e-2 for the 16-bit types, whose own rounding
# step is ~4e-3 (fp16) and ~8e-3 (bf16).
TOLERANCES = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2, torch.float64: 1e-7}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class Result:
    variant: str
    stats: Stats | None = None
    max_abs_error: float = 0.0
    passed: bool = True
    failures: list[str] = field(default_factory=list)


def build(cls, init_inputs, dtype, device="cuda"):
    """Build ``cls(*init_inputs)`` after ``torch.manual_seed(42)``, as KernelBench does."""
    torch.manual_seed(42)
    return cls(*init_inputs).to(device=device, dtype=dtype)


def run(
    problem,
    variants: dict,
    *,
    make_inputs,
    init_inputs,
    dtype: torch.dtype,
    trials: int = 5,
    runs: int = 100,
    warmup: int = 3,
    max_seconds: float = 5.0,
    log=print,
) -> list[Result]:
    """Check every variant class against ``problem.Model`` and time them all.

    ``variants`` maps a display name to a module class; ``make_inputs(fill, seed)`` returns a
    list of CUDA inputs made with ``fill`` (``torch.rand`` / ``torch.randn``).
    Returns one ``Result`` per variant, the reference ``Model`` first as ``"torch eager"``.
    """
    tol = TOLERANCES[dtype]
    ref = build(problem.Model, init_inputs, dtype)
    models = {name: build(cls, init_inputs, dtype) for name, cls in variants.items()}
    results = {"torch eager": Result("torch eager")}
    results.update({name: Result(name) for name in models})
    ref_state = ref.state_dict()
    for name, m in models.items():
        state = m.state_dict()
        if state.keys() != ref_state.keys() or any(not torch.equal(state[k], ref_state[k]) for k in state):
            results[name].passed = False
            results[name].failures.append("weights differ from Model's under the same seed")

    checks = [("rand", torch.rand, 1000 + t) for t in range(trials)] + [("randn", torch.randn, 2000)]
    with torch.no_grad():
        for i, (kind, fill, seed) in enumerate(checks):
            inputs = make_inputs(fill, seed)
            expected = ref(*inputs)
            exact = None  # Model in float64, made when a randn result misses allclose
            for name, m in models.items():
                got = m(*inputs)
                r = results[name]
                if got.shape != expected.shape:
                    r.passed = False
                    r.failures.append(f"{kind} trial {i}: shape {tuple(got.shape)} != {tuple(expected.shape)}")
                    continue
                err = (
                    (got.float() - expected.float()).abs().nan_to_num(nan=float("inf")).max().item()
                    if got.numel()
                    else 0.0
                )
                r.max_abs_error = max(r.max_abs_error, err)
                if torch.allclose(got, expected, atol=tol, rtol=tol):
                    continue
                if kind == "randn" and dtype != torch.float64:
                    if exact is None:
                        exact = build(problem.Model, init_inputs, torch.float64)(*[x.double() for x in inputs])
                    ours, torchs = _max_err(got, exact), _max_err(expected, exact)
                    if ours <= torchs:
                        continue
                    r.failures.append(
                        f"{kind} trial {i}: max abs error {err:.3g} over tolerance {tol:g}, and "
                        f"{ours:.3g} from the float64 result against torch's {torchs:.3g}"
                    )
                else:
                    r.failures.append(f"{kind} trial {i}: max abs error {err:.3g} over tolerance {tol:g}")
                r.passed = False
            log(f"  correctness {i + 1}/{len(checks)} ({kind}) done", file=sys.stderr)
            del inputs, expected, exact

        inputs = make_inputs(torch.rand, 3000)
        for name, model in [("torch eager", ref)] + list(models.items()):
            log(f"  timing {name} ...", file=sys.stderr)
            results[name].stats = time_cuda(lambda: model(*inputs), warmup=warmup, runs=runs, max_seconds=max_seconds)
    return list(results.values())


def _max_err(got: torch.Tensor, exact: torch.Tensor) -> float:
    """max |got - exact| (NaN where exact is not NaN counts as inf)."""
    if not got.numel():
        return 0.0
    return (got.double() - exact).abs().nan_to_num(nan=float("inf")).max().item()


def format_table(results: list[Result], title: str) -> str:
    """A readable table: variant, ms, speedup vs torch eager, max abs error, pass/fail."""
    base = results[0].stats.median
    rows = [("variant", "ms (median)", "p20-p80 ms", "runs", "vs torch", "max abs err", "correct")]
    for r in results:
        s = r.stats
        rows.append(
            (
                r.variant,
                f"{s.median:.4f}",
                f"{s.p20:.4f}-{s.p80:.4f}",
                str(s.runs),
                f"{base / s.median:.2f}x",
                f"{r.max_abs_error:.2e}",
                "PASS" if r.passed else "FAIL",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(rows[0], widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows[1:]]
    for r in results:
        for f in r.failures:
            lines.append(f"  {r.variant}: {f}")
    return "\n".join(lines)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options every KernelBench example script takes, after its problem's sizes: --dtype
    (a key of DTYPES), --trials, --runs and --max-seconds (``run``'s arguments)."""
    p.add_argument("--dtype", choices=list(DTYPES), default="float32", help="default %(default)s")
    p.add_argument("--trials", type=int, default=5, help="random correctness trials (default %(default)s)")
    p.add_argument("--runs", type=int, default=100, help="timed runs per variant (default %(default)s)")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=5.0,
        help="stop timing a variant after this long, once 5 runs are in (default %(default)s)",
    )


def report(results: list[Result]) -> int:
    """Prints ``run``'s results as a table (``format_table``) and a verdict line naming any
    variant that failed; returns the exit status: 0 when every variant passed, else 1."""
    print(format_table(results, "results (torch eager = Model):"))
    bad = [r.variant for r in results if not r.passed]
    print("all variants correct" if not bad else f"INCORRECT: {', '.join(bad)}")
    return 1 if bad else 0
