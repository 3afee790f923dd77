"""Command line: ``python -m cupy_ops compile [--arch sm_90 ...]``.

``compile`` builds every registered kernel variant with NVRTC for the given architectures
(default sm_80 and sm_90) without touching a GPU, prints one line per variant with its
registers and spill bytes, and exits 1 if any variant fails.
"""
from __future__ import annotations

import argparse
import re
import sys
import time


def _compile(args) -> int:
    from . import compiler

    try:
        major, minor = compiler.offline_nvrtc().getVersion()
    except Exception as exc:  # ImportError, or libnvrtc not found
        print(f"error: NVRTC is not available ({exc}); install cupy_ops with the cuda12 or cuda13 extra",
              file=sys.stderr)
        return 2
    specs = compiler.registered()
    print(f"NVRTC {major}.{minor}; options: {' '.join(compiler.OPTIONS)} (+ -arch, -ftz=true as CuPy adds)")
    header = f"{'source':<26} {'kernel':<34} {'arch':<6} {'status':<6} {'regs':>5} {'spill st/ld':>12} {'stack':>6} {'smem':>6}"
    print(header)
    print("-" * len(header))
    failures = 0
    total = 0
    shown: set[str] = set()
    t0 = time.perf_counter()
    for arch in args.arch:
        for spec in specs.values():
            for r in compiler.compile_offline(spec.filename, spec.name_expressions, arch):
                if r.skipped:
                    print(f"{r.filename:<26} {r.expr:<34} {arch:<6} {'skip':<6} ({r.skipped})")
                    continue
                total += 1
                if r.ok:
                    spill = "?" if r.spill_stores is None else f"{r.spill_stores}/{r.spill_loads}"
                    stack = "?" if r.stack_bytes is None else r.stack_bytes
                    print(f"{r.filename:<26} {r.expr:<34} {r.arch:<6} {'ok':<6} {r.registers:>5} "
                          f"{spill:>12} {stack:>6} {r.shared_bytes or 0:>6}")
                else:
                    failures += 1
                    print(f"{r.filename:<26} {r.expr:<34} {arch:<6} FAILED")
                    if r.log not in shown:  # one NVRTC log per failed compile, not per variant
                        shown.add(r.log)
                        print(f"{r.filename} ({arch}):\n  " + r.log.strip().replace("\n", "\n  "), file=sys.stderr)
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
