"""Prepacked weights against the plain call: ``relu(F.linear(x, w, b)) / 2`` in float32 by torch
(fp32, TF32 off), by ``cupy_ops.linear_relu_div(..., algo="accurate")`` and by the same call with
``w`` prepacked (``cupy_ops.prepack``: the weight's fp16x3 pieces kept across calls), interleaved
in one process (CUDA events, warm-up, L2 flushed, medians), each with its error against float64.
What prepacking amortises: the split of the weight, one read of it and one write of its pieces a
call, where the plain call's plan splits it (docs/prepack.md).
"""

from __future__ import annotations

import argparse
import sys

SHAPES = ("128x32768x32768", "128x8192x8192", "1024x8192x8192", "4096x4096x4096")
VARIANTS = ("torch fp32", "cupy_ops accurate", "cupy_ops accurate prepacked")


def parse_shape(text: str) -> tuple[int, int, int]:
    """``"MxKxN"`` as three positive ints; ``argparse.ArgumentTypeError`` otherwise."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"a shape is MxKxN of positive integers, got {text!r}")
    return tuple(int(p) for p in parts)


def measure(M: int, K: int, N: int, runs: int, max_seconds: float) -> dict:
    """``{variant: (ms, max abs error vs float64, Stats)}`` and the plans, for one shape."""
    import torch
    import torch.nn.functional as F

    import cupy_ops
    from cupy_ops.ops import gemm
    from cupy_ops.timing import time_cuda_interleaved

    torch.manual_seed(0)
    x = torch.randn(M, K, device="cuda")
    w = torch.randn(N, K, device="cuda") / K**0.5
    b = torch.randn(N, device="cuda")
    packed = cupy_ops.prepack(w.clone())
    fns = {
        "torch fp32": lambda: torch.relu(F.linear(x, w, b)) / 2,
        "cupy_ops accurate": lambda: cupy_ops.linear_relu_div(x, w, b, 2.0, algo="accurate"),
        "cupy_ops accurate prepacked": lambda: cupy_ops.linear_relu_div(x, packed, b, 2.0, algo="accurate"),
    }
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        exact = torch.relu(F.linear(x.double(), w.double(), b.double())) / 2
        errors = {k: (f().double() - exact).abs().max().item() for k, f in fns.items()}
        del exact
        stats = time_cuda_interleaved(fns, runs=runs, rounds=2, max_seconds=max_seconds)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    plans = {
        "plain": str(cupy_ops.gemm_plan(x, w.t(), algo="accurate", bias_relu_scale=True)),
        "prepacked": str(gemm.plan_for(x, w.t(), "EpiBiasReluScale", "accurate", b_packed=True)),
        "bytes": cupy_ops.prepacked_bytes(packed),
    }
    cupy_ops.unprepack(packed)
    return {k: (stats[k].median, errors[k], stats[k]) for k in fns}, plans


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m cupy_ops.bench.prepacked",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--shape", action="append", type=parse_shape, help=f"MxKxN, repeatable (default: {SHAPES})")
    p.add_argument("--runs", type=int, default=20, help="timed runs per variant (default %(default)s)")
    p.add_argument("--max-seconds", type=float, default=6.0, help="time budget per variant (default %(default)s)")
    p.add_argument("--results", metavar="PATH", help="append the rows to a benchmark results file (JSON lines)")
    args = p.parse_args(argv)
    from .timing import gpu_problem

    problem = gpu_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    import torch

    from .env import describe, environment
    from .results import PREPACKED, append, record

    if torch.cuda.get_device_capability() != (9, 0):
        print(
            "error: prepacked weights are fp16x3's pieces, which run on Hopper (compute capability 9.0) only",
            file=sys.stderr,
        )
        return 1
    env = environment()
    print(f"float32 relu(F.linear(x, w, b)) / 2, x (M, K), w (N, K); {describe(env)}", flush=True)
    print("| M x K x N | variant | ms | vs torch fp32 | error vs fp64 |")
    print("|---|---|---|---|---|")
    records = []
    for M, K, N in args.shape or [parse_shape(s) for s in SHAPES]:
        try:
            got, plans = measure(M, K, N, args.runs, args.max_seconds)
        except torch.cuda.OutOfMemoryError:
            # x, w, its copy, the pieces and a float64 reference: ~(4 + 4 + 4 + 16) N K bytes
            need = (28 * N * K + 12 * M * K + 24 * M * N) / 2**30
            print(f"| {M}x{K}x{N} | skipped: needs about {need:.0f} GiB of GPU memory | - | - | - |", flush=True)
            torch.cuda.empty_cache()
            continue
        base = got["torch fp32"][0]
        shape = f"{M}x{K}x{N}"
        for variant, (ms, err, st) in got.items():
            print(f"| {shape} | {variant} | {ms:.3f} | {base / ms:.2f}x | {err:.2e} |", flush=True)
            records.append(
                record(
                    env,
                    PREPACKED,
                    "float32",
                    shape,
                    variant,
                    ms,
                    p20=st.p20,
                    p80=st.p80,
                    runs=st.runs,
                    ratio=base / ms,
                    max_abs_error=err,
                )
            )
        print(f"  plans: {plans['plain']}\n         {plans['prepacked']}; pieces {plans['bytes'] / 2**20:.0f} MiB")
    if args.results:
        append(args.results, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
