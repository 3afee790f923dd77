"""``python -m cupy_ops.bench``: cupy_ops vs torch eager and torch.compile, KernelBench's way.

Prints a table (and the eager host overhead per call); ``--json`` writes every figure as JSON
lines, one measurement a line with the commit, date, GPU and versions; ``--markdown`` writes
README's table; ``--plot`` draws speedup vs size (needs matplotlib: the bench extra); each says
where it wrote. ``--from-json`` reads a ``--json`` file back and measures nothing (no GPU
needed). The cases: ``cases``; running them: ``running``; the tables: ``report``; the plot:
``plot``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import cases, report, results, running
from .env import describe, environment
from .timing import gpu_problem

PROBLEMS = ["relu", "relu_div", "linear_relu_div", "matmul"]
_NO_MATPLOTLIB = '--plot needs matplotlib: pip install "cupy_ops[bench]" (or pip install matplotlib)'


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _output_problem(args) -> str | None:
    """Why an output the user asked for cannot be written, found before anything is measured."""
    for option, path in (("--json", args.json), ("--markdown", args.markdown), ("--plot", args.plot)):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not os.path.isdir(folder):
            return f"{option} {path}: the folder {folder} does not exist"
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return _NO_MATPLOTLIB
    return None


def _write_outputs(args, rows, env) -> None:
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(report.format_markdown(rows, env) + "\n")
        print(f"wrote {args.markdown} (README's table)")
    if args.plot:
        from .plot import plot

        plot(rows, args.plot, f"cupy_ops vs torch eager on {env.get('gpu')}")
        print(f"wrote {args.plot} (speedup vs size)")


def _from_json(args) -> int:
    try:
        rows, env, _host = results.read(args.from_json)
    except FileNotFoundError:
        return _error(f"--from-json {args.from_json}: no such file")
    except OSError as exc:
        return _error(f"--from-json {args.from_json}: cannot read it ({exc.strerror or exc})")
    except results.ResultFileError as exc:
        return _error(
            f"--from-json {args.from_json} is not a benchmark result file "
            f"(python -m cupy_ops.bench --json writes them): {exc}"
        )
    rows = [
        r for r in rows if (not args.problem or r.problem in args.problem) and (not args.dtype or r.dtype in args.dtype)
    ]
    if not rows:
        return _error(f"--from-json {args.from_json}: no case of the problems and dtypes asked for")
    print(f"{args.from_json}: {describe(env)}")
    print(report.format_rows(rows))
    _write_outputs(args, rows, env)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupy_ops.bench", description=__doc__)
    p.add_argument("--problem", action="append", choices=PROBLEMS, help="repeatable (default: all)")
    p.add_argument("--dtype", action="append", choices=list(cases.DTYPES), help="repeatable (default: all)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and runs: about a minute")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (its compiles take time)")
    p.add_argument("--runs", type=int, default=None, help="timed runs per variant (default 100, quick 30)")
    p.add_argument("--max-seconds", type=float, default=None, help="time budget per variant (default 3, quick 1)")
    p.add_argument("--no-host", action="store_true", help="skip the host-overhead table")
    p.add_argument("--json", metavar="PATH", help="write every measurement as JSON lines (a results file)")
    p.add_argument("--plot", metavar="PATH", help="write a PNG of speedup vs size")
    p.add_argument(
        "--markdown",
        metavar="PATH",
        help="write README's table: the matrix ops' (the elementwise ops' when no GEMM was run)",
    )
    p.add_argument(
        "--from-json",
        metavar="PATH",
        help="measure nothing: read a --json file (no GPU needed) for the table, --markdown and --plot; "
        "--problem and --dtype pick its cases",
    )
    args = p.parse_args(argv)
    if args.from_json and args.json:
        return _error("--json writes the measurements of a run: it does not go with --from-json")
    problem_text = _output_problem(args)
    if problem_text:
        return _error(problem_text)
    if args.from_json:
        return _from_json(args)
    problem_text = gpu_problem()
    if problem_text:
        print(problem_text, file=sys.stderr)
        return 1
    env = environment()
    runs = args.runs or (30 if args.quick else 100)
    max_seconds = args.max_seconds or (1.0 if args.quick else 3.0)
    print(f"{describe(env)}; median of up to {runs} runs, L2 flushed before each", flush=True)
    rows = running.run(
        args.problem or PROBLEMS,
        args.dtype or list(cases.DTYPES),
        quick=args.quick,
        compile_too=not args.no_compile,
        runs=runs,
        max_seconds=max_seconds,
        log=running.log_stderr,
    )
    print(report.format_rows(rows))
    host = None
    if not args.no_host:
        import subprocess

        from . import host as host_mod

        # a fresh process: this one has run torch.compile and large benchmarks
        proc = subprocess.run(
            [sys.executable, "-m", "cupy_ops.bench.host", "--json"], capture_output=True, text=True, timeout=600
        )
        if proc.returncode == 0:
            host = json.loads(proc.stdout.strip().splitlines()[-1])
            print("\nhost cost per call beside torch (64 x 64, GPU idle, fresh process):")
            print(host_mod.format_table(host))
        else:
            print(f"host-overhead measurement failed: {proc.stderr.strip()[-500:]}", file=sys.stderr)
    if args.json:
        results.write(args.json, results.to_records(rows, env, host, runs=runs, max_seconds=max_seconds))
        print(f"wrote {args.json} (every measurement, JSON lines)")
    _write_outputs(args, rows, env)
    bad = [f"{r.problem} {r.dtype} {r.shape} {v.name}" for r in rows for v in r.variants if v.error]
    if bad:
        print("variants that failed: " + "; ".join(bad), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
