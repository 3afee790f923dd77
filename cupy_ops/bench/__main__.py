"""``python -m cupy_ops.bench``: cupy_ops vs torch eager and torch.compile, KernelBench's way.

Prints a table (and the eager host overhead per call); ``--json`` keeps every figure with the
GPU name and versions; ``--plot`` draws speedup vs size (needs matplotlib: the bench extra).
"""
from __future__ import annotations

import argparse
import json
import sys

from . import suite
from .timing import gpu_problem

PROBLEMS = ["relu", "relu_div", "linear_relu_div", "matmul"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupy_ops.bench", description=__doc__)
    p.add_argument("--problem", action="append", choices=PROBLEMS, help="repeatable (default: all)")
    p.add_argument("--dtype", action="append", choices=list(suite.DTYPES), help="repeatable (default: all)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and runs: about a minute")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (its compiles take time)")
    p.add_argument("--runs", type=int, default=None, help="timed runs per variant (default 100, quick 30)")
    p.add_argument("--max-seconds", type=float, default=None, help="time budget per variant (default 3, quick 1)")
    p.add_argument("--no-host", action="store_true", help="skip the host-overhead table")
    p.add_argument("--json", metavar="PATH", help="write all figures as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG of speedup vs size")
    p.add_argument("--markdown", metavar="PATH", help="write the table as Markdown (for README.md)")
    p.add_argument("--from-json", metavar="PATH", help="measure nothing: redraw --plot from a --json file")
    args = p.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        rows = suite.rows_from_json(data)
        print(suite.format_rows(rows))
        if args.plot:
            suite.plot(rows, args.plot, f"cupy_ops vs torch eager on {data['environment']['gpu']}")
        return 0
    problem_text = gpu_problem()
    if problem_text:
        print(problem_text, file=sys.stderr)
        return 1
    env = suite.environment()
    runs = args.runs or (30 if args.quick else 100)
    max_seconds = args.max_seconds or (1.0 if args.quick else 3.0)
    print(f"{suite.describe(env)}; median of up to {runs} runs, L2 flushed before each", flush=True)
    rows = suite.run(args.problem or PROBLEMS, args.dtype or list(suite.DTYPES), quick=args.quick,
                     compile_too=not args.no_compile, runs=runs, max_seconds=max_seconds, log=suite.log_stderr)
    print(suite.format_rows(rows))
    host = None
    if not args.no_host:
        import subprocess

        from . import host as host_mod

        # a fresh process: this one has run torch.compile and large benchmarks
        proc = subprocess.run([sys.executable, "-m", "cupy_ops.bench.host", "--json"], capture_output=True,
                              text=True, timeout=600)
        if proc.returncode == 0:
            host = json.loads(proc.stdout.strip().splitlines()[-1])
            print("\nhost overhead per eager call (4096 fp32 elements, GPU idle, fresh process):")
            print(host_mod.format_table(host))
        else:
            print(f"host-overhead measurement failed: {proc.stderr.strip()[-500:]}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(suite.to_json(rows, {"environment": env, "host_overhead_us": host,
                                           "runs": runs, "max_seconds": max_seconds}), f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(suite.format_markdown(rows, env["gpu"]) + "\n")
    if args.plot:
        suite.plot(rows, args.plot, f"cupy_ops vs torch eager on {env['gpu']}")
    bad = [f"{r.problem} {r.dtype} {r.shape} {v.name}" for r in rows for v in r.variants if v.error]
    if bad:
        print("variants that failed: " + "; ".join(bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
