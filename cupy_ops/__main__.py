"""Command line of cupy_ops (no GPU needed for any command):

  python -m cupy_ops info
      versions (cupy_ops, Python, torch and its CUDA, CuPy, NVRTC, driver), the GPUs and their
      compute capability, and the kernel cache folder with its size: what a bug report needs.
      Says what is missing (no GPU, no CuPy) instead of failing.

  python -m cupy_ops compile [--arch sm_90 ...] [PATH.cu ... | FILE.py ...] [--name KERNEL ...] [--jobs N]
                             [--emit ptx|cubin] [--out DIR] [--option=-DNAME=1 ...] [--source NAME ...]
      compiles kernels with NVRTC as their first launch would (same options), without a GPU,
      in N processes, and prints one line per kernel variant: registers, spill bytes, shared
      memory (the same report for any N). With no PATH: every built-in variant (``--source
      gemm.cu``, repeatable: only that file's). With PATH.cu: your file's kernels (``--name``,
      repeatable: only those; a name expression such as 'tp<float, 4>' names one instantiation of a
      template; a ``template <class T>`` kernel is built for float, f16, bf16 and double, as
      ``cupy_ops.Kernel`` would). ``--emit ptx`` (or ``cubin``) then writes each kernel's
      compiled code, one file per kernel and architecture named KERNEL.ARCH.ptx, next to its
      PATH.cu (``--out``: into DIR, made if missing), and prints where; ``--option``: an NVRTC
      option of your kernels (``--option=-DBLOCK=256``, repeatable). Default architectures:
      sm_80 and sm_90 (the built-in kernels need sm_80 or newer: an older one is named first).
      Each built-in variant's result is its own, whatever ``--jobs``. With FILE.py: runs each
      file (as a module, not as __main__) and compiles every GEMM epilogue it declares
      (``cupy_ops.epilogue``) into each GEMM kernel template, its gradient's too. Exits 1 if any
      variant fails to compile (NVRTC's log goes to stderr), 2 if NVRTC is missing.

  python -m cupy_ops warm [--capability 9.0 ...] [--jobs N]
      compiles every built-in kernel variant this machine's GPUs (or the compute capabilities
      given) would launch into the kernel cache, in N processes, so no first call waits for
      NVRTC. Without a GPU, ``--capability`` is needed (a cache made for another machine's
      GPUs). Shows its progress, prints what it compiled and what was cached already; exits 1
      if a variant fails.

  python -m cupy_ops warm --tune FILE.py [FILE.py ...]
      runs each FILE.py (as a module, not as __main__) and tunes every kernel it declares with
      ``cupy_ops.autotune(..., examples=...)`` on this machine's GPU, for each example's shape
      key, into the kernel cache: a later process launches the winners without timing. Prints
      one line per shape key (the winner, timed now or cached already); exits 1 if a shape
      key has no configuration left, 2 without a GPU.

--jobs defaults to the CPU count, at most 8 (compile PATH.cu: 1). ``--version``: cupy_ops's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
import warnings
from pathlib import Path

from .bench._shadow import restore

restore()  # a folder named cupy_ops in the current directory hides the package: see _shadow

DEFAULT_JOBS = min(8, os.cpu_count() or 1)
_NO_NVRTC = 'install cupy_ops with the cuda12 or cuda13 extra (pip install -e ".[cuda13]")'
# The oldest architecture the built-in kernels are written for: the tensor-core GEMMs use
# cp.async and bf16 / tf32 mma.sync (sm_80); for sm_75, 9 of gemm.cu's 43 variants fail
MIN_ARCH = 80
# Lines of NVRTC's log shown for a failed built-in variant, its repeated messages shown once
LOG_LINES = 20


def _old_archs(archs) -> list[str]:
    return [a for a in archs if int(re.sub(r"\D", "", a)) < MIN_ARCH]


def _note_old_archs(archs) -> None:
    old = _old_archs(archs)
    if old:
        print(
            f"note: cupy_ops kernels need sm_80 or newer: {', '.join(old)} lack{'s' if len(old) == 1 else ''} the "
            'cp.async and bf16 / tf32 mma.sync instructions of the tensor-core GEMMs (algo="tc"), which fail there',
            file=sys.stderr,
            flush=True,
        )


def _nvrtc_version():
    from . import compiler

    try:
        return compiler.nvrtc.version()
    except Exception as exc:  # noqa: BLE001  ImportError, or libnvrtc not found
        print(f"error: NVRTC is not available ({exc}); {_NO_NVRTC}", file=sys.stderr)
        return None


def _user_tasks(paths, names, archs, options=()):
    """One task per (arch, kernel) of the user's files, and the ``(path, kernel)`` pairs;
    checks the files, kernels and NVRTC ``options`` first."""
    from .kernel import Kernel, kernel_names
    from .warm import CompileTask

    kernels = []
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise SystemExit(f"error: {path} is not a file")
        found = names or kernel_names(path.read_text(encoding="utf-8"))
        if not found:
            raise SystemExit(f"error: no `__global__ void NAME(...)` kernel found in {path}")
        for n in found:
            try:
                Kernel(path, n, options=options)
            except (ValueError, FileNotFoundError) as exc:
                hint = f" (--name '{n}<...>' names one)" if "name one instantiation" in str(exc) else ""
                raise SystemExit(f"error: {path}: {exc}{hint}") from None
            kernels.append((str(path), n))
    return [CompileTask(arch, path, kernel=n, options=options) for arch in archs for path, n in kernels], kernels


def _file_stem(name: str) -> str:
    """A kernel name or name expression as a file name: ``tp<float, 4>`` -> ``tp_float_4``."""
    return re.sub(r"[^\w.-]+", "_", name).strip("_") or "kernel"


def _emit(kernels, archs, fmt: str, out: Path | None, options=()) -> int:
    """Write each kernel's ``fmt`` code for each arch (``Kernel.export``); prints where. Returns
    how many failed (their NVRTC log was shown with the summary)."""
    from . import compiler
    from .kernel import Kernel

    failed = 0
    for path, name in kernels:
        folder = Path(out) if out else Path(path).resolve().parent
        for arch in archs:
            try:
                e = Kernel(path, name, options=options).export(arch, fmt)
            except compiler.KernelCompileError:
                failed += 1
                continue
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{_file_stem(name)}.{arch}.{fmt}"
            if fmt == "ptx":
                target.write_text(e.image)
            else:
                target.write_bytes(e.image)
            symbols = ", ".join(f"{expr} = {sym}" for expr, sym in e.lowered.items())
            print(f"wrote {target} ({fmt} for {e.arch}; {symbols})")
    return failed


def _compile(args) -> int:
    version = _nvrtc_version()
    if version is None:
        return 2
    from . import compiler
    from .warm import builtin_compile_tasks, builtin_source_names, compile_tasks

    kernels = []
    if args.paths and all(str(p).endswith(".py") for p in args.paths):
        return _compile_epilogues(args.paths, args.arch)
    if args.paths and args.source:
        raise SystemExit("error: --source picks built-in sources; it does not go with PATH.cu")
    if args.paths:
        args.jobs = args.jobs or 1
        if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
            raise SystemExit(f"error: --out {args.out} is a file, not a folder")
        tasks, kernels = _user_tasks(args.paths, args.name, args.arch, tuple(args.option or ()))
    else:
        for flag, value in (
            ("--name", args.name),
            ("--emit", args.emit),
            ("--out", args.out),
            ("--option", args.option),
        ):
            if value:
                raise SystemExit(f"error: {flag} needs a PATH.cu")
        known = builtin_source_names()
        for name in args.source or ():
            if name not in known:
                raise SystemExit(
                    f"error: --source {name}: no built-in source of that name; they are {', '.join(known)}"
                )
        args.jobs = args.jobs or DEFAULT_JOBS
        _note_old_archs(args.arch)
        tasks = builtin_compile_tasks(args.arch, args.jobs, args.source)
    base = compiler.USER_OPTIONS if args.paths else compiler.BASE_OPTIONS
    print(f"NVRTC {version[0]}.{version[1]}; options: {' '.join(base)} -arch=<arch> + each source's -D defines")
    header = (
        f"{'source':<20} {'kernel':<48} {'arch':<7} {'status':<6} {'regs':>5} {'spill st/ld':>12} {'stack':>6} "
        f"{'smem':>6}"
    )
    print(header)
    print("-" * len(header), flush=True)
    failures = total = 0
    shown: set = set()
    t0 = time.perf_counter()
    for task, results in zip(tasks, compile_tasks(tasks, args.jobs)):
        arch = task.arch
        for r in results:
            if r.skipped:
                print(f"{Path(r.source).name:<20} {r.expr:<48} {arch:<7} {'skip':<6} ({r.skipped})")
                continue
            total += 1
            if r.ok:
                spill = "?" if r.spill_stores is None else f"{r.spill_stores}/{r.spill_loads}"
                stack = "?" if r.stack_bytes is None else r.stack_bytes
                print(
                    f"{Path(r.source).name:<20} {r.expr:<48} {r.arch:<7} {'ok':<6} {r.registers:>5} {spill:>12} "
                    f"{stack:>6} {r.shared_bytes or 0:>6}"
                )
                _print_perf(r)
            else:
                failures += 1
                print(f"{Path(r.source).name:<20} {r.expr:<48} {r.arch:<7} FAILED")
                if args.paths:  # one program of the file's kernel: its log may be another instantiation's
                    _show_log(f"{r.source} ({arch})", r.log.strip().splitlines(), shown, r.log)
                else:  # the variant's own log, shown once for the same errors in other PTX lines
                    lines = _condensed(r.log)
                    key = tuple(re.sub(r"\d+", "#", line) for line in lines)
                    _show_log(f"{r.source} {r.expr} ({arch})", lines, shown, key, LOG_LINES)
        sys.stdout.flush()
    dt = time.perf_counter() - t0
    print(
        f"{total - failures} of {total} kernel variants compiled for {', '.join(args.arch)} in {dt:.1f} s "
        f"with {_processes(min(args.jobs, len(tasks)))}"
    )
    if args.emit:
        failures += _emit(kernels, args.arch, args.emit, args.out, tuple(args.option or ()))
    return 1 if failures else 0


def _print_perf(r) -> None:
    """ptxas's performance notes on a compiled kernel (wgmmas serialized, ...), under its row."""
    for note in r.perf:
        print(f"    ptxas {note}", flush=True)


def _condensed(log: str) -> list[str]:
    """The lines of ``log``, each message once (ptxas repeats one error at every use, its PTX
    line number the only difference), with how many more like it there were."""
    first: dict[str, list] = {}
    for line in log.strip().splitlines():
        first.setdefault(re.sub(r"\d+", "#", line), [line, 0])[1] += 1
    return [line + (f" (and {n - 1} more like it)" if n > 1 else "") for line, n in first.values()]


def _show_log(title: str, lines: list[str], shown: set, key, cap: int | None = None) -> None:
    """NVRTC's log ``lines`` of a failed compile on stderr under ``title``, once per ``key``;
    ``cap``: at most that many lines."""
    if key in shown:
        return
    shown.add(key)
    if cap is not None and len(lines) > cap:
        lines = [*lines[:cap], f"... ({len(lines) - cap} more lines)"]
    print(f"{title}:\n  " + "\n  ".join(lines), file=sys.stderr)


def _processes(n: int) -> str:
    return f"{n} process" + ("es" if n != 1 else "")


def _folder_size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return len(files), sum(p.stat().st_size for p in files)


def _info(args) -> int:
    import platform

    import torch

    from . import __version__
    from .bench.env import environment
    from .compiler import cache, headers, nvrtc

    with warnings.catch_warnings():  # a CUDA-version mismatch is shown as a row below instead
        warnings.simplefilter("ignore")
        env = environment()
    rows = [
        ("cupy_ops", f"{__version__} ({Path(__file__).resolve().parent})"),
        ("Python", platform.python_version()),
        ("torch", f"{torch.__version__}, CUDA {env['cuda']}"),
    ]
    cupy_line = env["cupy"]
    if cupy_line == "not installed":
        cupy_line += f": {_NO_NVRTC}"
    rows += [("CuPy", cupy_line), ("NVRTC", env["nvrtc"]), ("driver", env["driver"])]
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            rows.append(
                (
                    f"cuda:{i}",
                    f"{p.name}, compute capability {p.major}.{p.minor}, "
                    f"{p.multi_processor_count} SMs, {p.total_memory / 2**30:.0f} GiB",
                )
            )
    else:
        why = "torch is a CPU-only build" if torch.version.cuda is None else "torch.cuda.is_available() is False"
        rows.append(("GPUs", f"none ({why})"))
    with contextlib.suppress(ImportError):  # no CuPy, hence no NVRTC: its row above says what to install
        rows += [("CUDA headers", line) for line in headers.describe(nvrtc.version())]
    folder = cache.requested_folder()
    n, size = _folder_size(folder)
    rows.append(("kernel cache", f"{folder}: {n} files, {size / 2**20:.1f} MiB (CUPY_CACHE_DIR moves it)"))
    mismatch = nvrtc.cuda_mismatch()
    if mismatch:
        rows.append(("warning", mismatch))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0


def _progress(stream):
    """``warm``'s progress callback: one line rewritten in place on a terminal, else a line
    per tenth of the variants (a whole cold warm takes ~40 s on a 2-core CPU)."""
    t0 = time.perf_counter()
    tty = stream.isatty()

    def show(done: int, total: int) -> None:
        text = f"{done}/{total} kernel variants done ({time.perf_counter() - t0:.0f} s)"
        if tty:
            stream.write("\r" + text + ("\n" if done == total else ""))
            stream.flush()
        elif done % max(1, -(-total // 10)) == 0 or done == total:
            print(text, file=stream, flush=True)

    return show


def _compile_epilogues(paths, archs) -> int:
    """``compile FILE.py``: every GEMM epilogue the files declare, into each GEMM kernel template."""
    import runpy

    from .ops import gemm

    before = set(gemm.epilogues.declared())
    kept = []  # the files' globals
    for path in paths:
        if not Path(path).is_file():
            raise SystemExit(f"error: {path} is not a file")
        kept.append(runpy.run_path(str(path), run_name="__cupy_ops_compile__"))
    found = [e for e in gemm.epilogues.declared() if e not in before]
    if not found:
        raise SystemExit(f"error: {', '.join(map(str, paths))} declares no cupy_ops.epilogue(...)")
    failures = total = 0
    t0 = time.perf_counter()
    for e in found:
        print(f"epilogue {e.name} ({e.tag}){' with its derivative' if e.derivative else ''}", flush=True)
        for arch in archs:
            for k in gemm.planner.epilogue_kernels(e):
                for r in k.compile_offline(arch):
                    if r.skipped:
                        continue
                    total += 1
                    if r.ok:  # what a slow epilogue shows first: registers and spills
                        spill = "?" if r.spill_stores is None else f"{r.spill_stores}/{r.spill_loads}"
                        line = f"  {r.expr:<72} {r.arch:<7} ok     regs {r.registers:>3}  spill st/ld {spill}"
                        print(line, flush=True)
                        _print_perf(r)
                    else:
                        failures += 1
                        print(f"  {r.expr:<72} {r.arch:<7} FAILED", flush=True)
                        print(r.log.strip(), file=sys.stderr)
    print(f"{total - failures} of {total} GEMM kernels compiled with the epilogues in {time.perf_counter() - t0:.1f} s")
    return 1 if failures else 0


def _warm_tune(paths) -> int:
    """``warm --tune``: tune the autotuned kernels ``paths`` declare with ``examples=``."""
    import runpy

    from . import autotuning

    problem = autotuning.tuning_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    before = {id(a) for a in autotuning.declared()}
    kept = []  # the files' globals: the autotuned kernels live as long as these
    for path in paths:
        if not Path(path).is_file():
            raise SystemExit(f"error: {path} is not a file")
        kept.append(runpy.run_path(str(path), run_name="__cupy_ops_warm__"))
    tuned = [a for a in autotuning.declared() if id(a) not in before]  # the files' own, run now
    if not tuned:
        raise SystemExit(f"error: {', '.join(map(str, paths))} declares no cupy_ops.autotune(..., examples=...)")
    failed = 0
    for a in tuned:
        try:
            choices = a.warm()
        except RuntimeError as exc:
            print(f"FAILED {a.name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        for c in choices:
            how = "timed now" if c.origin == "timed" else "cached already"
            ms = "" if c.ms is None else f"{c.ms:.4f} ms, "
            print(f"{a.name} {c.key}: {c.config.label()} ({ms}{how})")
    del kept
    return 1 if failed else 0


def _warm(args) -> int:
    from .warm import warm

    if _nvrtc_version() is None:
        return 2
    if args.tune:
        return _warm_tune(args.tune)
    caps = args.capability
    if not caps:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(
                "error: no CUDA GPU here to read the compute capability from; pass --capability, "
                "e.g. --capability 9.0 (an H100 or H200) to fill the cache for such a GPU"
            )
        caps = [tuple(torch.cuda.get_device_capability(i)) for i in range(torch.cuda.device_count())]
    _note_old_archs(f"sm_{major}{minor}" for major, minor in caps)
    t0 = time.perf_counter()
    results = warm(caps, args.jobs, progress=_progress(sys.stderr))
    failed = [r for r in results if r.error]
    for r in failed:
        print(f"FAILED {r.source} {r.expr} ({r.arch}): {r.error}", file=sys.stderr)
    fresh = sum(1 for r in results if not r.cached and not r.error)
    cpu = sum(r.seconds for r in results if not r.cached)
    capabilities = ", ".join(f"{major}.{minor}" for major, minor in dict.fromkeys(caps))
    print(
        f"{len(results)} kernel variants for compute capability {capabilities}: "
        f"{fresh} compiled ({cpu:.0f} s of NVRTC), {len(results) - fresh - len(failed)} already cached, "
        f"{len(failed)} failed; {time.perf_counter() - t0:.1f} s with {_processes(args.jobs)}"
    )
    return 1 if failed else 0


def _jobs(value: str) -> int:
    if not re.fullmatch(r"\d+", value) or int(value) < 1:
        raise argparse.ArgumentTypeError(f"--jobs must be an integer >= 1, got {value!r}")
    return int(value)


def _capability(value: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d{1,2})\.(\d)", value)
    if not m:
        raise argparse.ArgumentTypeError(f"--capability must look like 9.0 or 8.6, got {value!r}")
    return int(m.group(1)), int(m.group(2))


def _arch(value: str) -> str:
    from .compiler import targets

    try:
        return targets.check(value, "--arch")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv=None) -> int:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="python -m cupy_ops", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"cupy_ops {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, GPUs, the kernel cache: what a bug report needs")
    p = sub.add_parser("compile", help="compile kernel variants offline with NVRTC (no GPU needed)")
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH.cu",
        help="your kernel file(s), or FILE.py declaring GEMM epilogues; default: the built-in kernels",
    )
    p.add_argument(
        "--name",
        action="append",
        help="a __global__ kernel of PATH.cu to build, or a name expression of one instantiation of a "
        "template ('tp<float, 4>'); repeatable (default: every kernel in the file)",
    )
    p.add_argument(
        "--source",
        action="append",
        metavar="NAME",
        help="only this built-in source (a file of cuda_src/: gemm.cu, relu.cu, ...); repeatable (default: every one)",
    )
    p.add_argument(
        "--arch", action="append", type=_arch, help="target architecture, repeatable (default: sm_80 and sm_90)"
    )
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=None,
        help="compiling processes (default: the CPU count, at most 8, for the built-in kernels; "
        "1 for PATH.cu, whose few kernels compile faster than a process starts)",
    )
    p.add_argument(
        "--emit",
        choices=("ptx", "cubin"),
        help="also write each kernel of PATH.cu as PTX or a cubin, one file per kernel and architecture "
        "(KERNEL.ARCH.ptx), next to PATH.cu",
    )
    p.add_argument(
        "--out", metavar="DIR", help="the folder --emit writes into, made if missing (default: the folder of PATH.cu)"
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="OPTION",
        help="an NVRTC option for PATH.cu's kernels, as Kernel(options=) takes it; repeatable, written "
        "--option=-DBLOCK=256",
    )
    p = sub.add_parser("warm", help="compile every built-in kernel for this machine's GPUs into the kernel cache")
    p.add_argument(
        "--capability",
        action="append",
        type=_capability,
        help="compute capability to build for, repeatable (default: this machine's GPUs)",
    )
    p.add_argument(
        "--jobs", type=_jobs, default=DEFAULT_JOBS, help="compiling processes (default: the CPU count, at most 8)"
    )
    p.add_argument(
        "--tune",
        nargs="+",
        metavar="FILE.py",
        help="instead, tune the kernels FILE.py declares with cupy_ops.autotune(..., examples=...) on this "
        "GPU into the kernel cache",
    )
    args = parser.parse_args(argv)
    if args.command == "info":
        return _info(args)
    if args.command == "warm":
        return _warm(args)
    args.arch = args.arch or ["sm_80", "sm_90"]
    return _compile(args)


if __name__ == "__main__":
    sys.exit(main())
