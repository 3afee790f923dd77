"""Command line: ``python -m cupy_ops compile [--arch sm_90 ...]``.

``compile`` builds every registered kernel variant with NVRTC for the given architectures
(default sm_80 and sm_90) without touching a GPU, with the options the run-time path uses,
prints one line per variant with its registers, spill bytes and shared memory, and exits 1
if any variant fails.
"""
from __future__ import annotations

import argparse
import re
import sys
import time


def _compile(args) -> int:
    from . import compiler
    from . import ops  # noqa: F401  (importing the ops declares their kernels in the registry)

    try:
        major, minor = compiler.nvrtc.version()
    except Exception as exc:  # ImportError, or libnvrtc not found
        print(f"error: NVRTC is not available ({exc}); install cupy_ops with the cuda12 or cuda13 extra",
              file=sys.stderr)
        return 2
    sources = compiler.sources()
    print(f"NVRTC {major}.{minor}; options: {' '.join(compiler.BASE_OPTIONS)} -arch=<arch> + each source's -D defines")
    header = (f"{'source':<20} {'kernel':<48} {'arch':<7} {'status':<6} {'regs':>5} {'spill st/ld':>12} {'stack':>6} "
              f"{'smem':>6}")
    print(header)
    print("-" * len(header))
    failures = total = 0
    shown: set[str] = set()
    t0 = time.perf_counter()
    for arch in args.arch:
        for src in sources:
            for r in compiler.compile_offline(src, arch):
                if r.skipped:
                    print(f"{r.source:<20} {r.expr:<48} {arch:<7} {'skip':<6} ({r.skipped})")
                    continue
                total += 1
                if r.ok:
                    spill = "?" if r.spill_stores is None else f"{r.spill_stores}/{r.spill_loads}"
                    stack = "?" if r.stack_bytes is None else r.stack_bytes
                    print(f"{r.source:<20} {r.expr:<48} {r.arch:<7} {'ok':<6} {r.registers:>5} {spill:>12} {stack:>6} "
                          f"{r.shared_bytes or 0:>6}")
                else:
                    failures += 1
                    print(f"{r.source:<20} {r.expr:<48} {r.arch:<7} FAILED")
                    if r.log not in shown:  # one NVRTC log per failed compile, not per variant
                        shown.add(r.log)
                        print(f"{r.source} ({arch}):\n  " + r.log.strip().replace("\n", "\n  "), file=sys.stderr)
    dt = time.perf_counter() - t0
    print(f"{total - failures} of {total} kernel variants compiled for {', '.join(args.arch)} in {dt:.1f} s")
    return 1 if failures else 0


def _arch(value: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}a?", value):
        raise argparse.ArgumentTypeError(f"--arch must look like sm_80 or sm_90, got {value!r}")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cupy_ops", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compile", help="compile every kernel variant offline (no GPU needed)")
    p.add_argument("--arch", action="append", type=_arch,
                   help="target architecture, repeatable (default: sm_80 and sm_90)")
    args = parser.parse_args(argv)
    if args.command == "compile":
        args.arch = args.arch or ["sm_80", "sm_90"]
        return _compile(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
