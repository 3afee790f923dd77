"""Compile every built-in kernel variant ahead of time, in parallel processes: into the
kernel cache (``python -m cupy_ops warm``), or offline for the register and spill report
(``python -m cupy_ops compile``).

A variant is otherwise compiled on its first launch, one at a time (the Hopper GEMM variants
take seconds each); a warm cache makes every first call a disk read. Needs NVRTC, not a GPU:
the architectures come from the compute capabilities asked for.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Warmed:
    """One variant: compiled now, or found in the cache, or failed (``error``: NVRTC's first line)."""

    source: str
    expr: str
    arch: str
    seconds: float
    cached: bool
    error: str | None = None


def jobs_for(capabilities) -> list[tuple[str, str, str]]:
    """``[(source, variant expression, arch)]`` of every built-in variant that a device of
    each compute capability ``(major, minor)`` would launch, with the architecture its first
    launch would compile for (``launch.handle``'s choice)."""
    from . import compiler, ops  # noqa: F401  (importing the ops declares their kernels)

    jobs = []
    for cap in dict.fromkeys(tuple(c) for c in capabilities):
        device_arch = compiler.targets.device_arch(*cap)
        for src in compiler.sources():
            target = src.target(device_arch)
            if target is None:
                continue
            if src.arch is None:
                target = compiler.arch_for(*cap)
            jobs += [(src.name, expr, target) for expr in src.variants]
    return list(dict.fromkeys(jobs))


def _one(job) -> Warmed:
    """In a worker process: compile (or find) one variant's binary."""
    from . import compiler, ops  # noqa: F401

    name, expr, arch = job
    src = next(s for s in compiler.sources() if s.name == name)
    t0 = time.perf_counter()
    try:
        b = compiler.binary(src.variant(expr), arch)
    except compiler.KernelCompileError as exc:
        return Warmed(name, expr, arch, time.perf_counter() - t0, False, str(exc).splitlines()[0])
    return Warmed(name, expr, arch, time.perf_counter() - t0, b.cached)


def _pool(workers: int) -> ProcessPoolExecutor:
    # spawned, not forked: a forked child would inherit whatever CUDA state the parent has
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def warm(capabilities, workers: int, progress=None) -> list[Warmed]:
    """Compile every built-in variant for ``capabilities`` into the kernel cache with
    ``workers`` (>= 1) processes (spawned: none of them touches CUDA). One ``Warmed`` per
    variant, in ``jobs_for``'s order; ``progress(done, total)`` is called before the first and
    as each finishes."""
    jobs = jobs_for(capabilities)
    results: list[Warmed | None] = [None] * len(jobs)
    if progress:
        progress(0, len(jobs))
    with _pool(workers) as ex:
        futures = {ex.submit(_one, job): i for i, job in enumerate(jobs)}
        for done, future in enumerate(as_completed(futures), 1):
            results[futures[future]] = future.result()
            if progress:
                progress(done, len(jobs))
    return results


@dataclass(frozen=True)
class CompileTask:
    """One NVRTC program of ``python -m cupy_ops compile``, as data a worker process can
    rebuild: the variants ``exprs`` of the built-in source ``source`` (None: all of them), or
    the kernel ``kernel`` of the user's file ``source``."""

    arch: str
    source: str
    exprs: tuple[str, ...] | None = None
    kernel: str | None = None
    options: tuple[str, ...] = ()  # the user's kernel's NVRTC options


def run_compile_task(task: CompileTask):
    """``compile_offline``'s results of one task; a built-in source's variants each their own
    (``each_alone``). A user's kernel is one task whatever ``--jobs``: its instantiations are
    compiled together, as ``Kernel.compile_offline`` does."""
    if task.kernel is not None:
        from .kernel import Kernel

        return Kernel(Path(task.source), task.kernel, options=task.options).compile_offline(task.arch)
    from . import compiler, ops  # noqa: F401

    src = next(s for s in compiler.sources() if s.name == task.source)
    return each_alone(src, task.arch, compiler.compile_offline(src, task.arch, task.exprs))


def each_alone(src, arch: str, results: list) -> list:
    """``results`` of one program of ``src``'s variants, or, where that program failed as a
    whole (NVRTC and ptxas stop a program at any kernel's error: gemm.cu's cp.async kernels for
    sm_75 failed the naive ones beside them), each variant's result compiled alone. So a
    variant's result does not depend on the variants compiled with it, and ``compile``'s
    count of variants compiled is the same for every ``--jobs``."""
    from . import compiler

    whole = (
        len(results) > 1
        and all(not r.ok and not r.skipped and r.registers is None for r in results)
        and len({r.log for r in results}) == 1
    )
    if not whole:
        return results
    return [compiler.compile_offline(src, arch, [r.expr])[0] for r in results]


def builtin_source_names() -> list[str]:
    """The file names of the built-in sources (``gemm.cu``, ``relu.cu``, ...), in registration order."""
    from . import compiler, ops  # noqa: F401

    return list(dict.fromkeys(s.name for s in compiler.sources()))


def builtin_compile_tasks(archs, jobs: int, names=None) -> list[CompileTask]:
    """Every built-in variant (of the sources called ``names``, default all) for each of
    ``archs``, each source's in up to ``jobs`` programs of consecutive variants: NVRTC compiles
    each kernel on its own either way, so the report is the same (``each_alone``), and one
    program per source would leave the Hopper GEMMs (34 of the 46 s for sm_90 on a 2-core CPU)
    to one process."""
    from . import compiler, ops  # noqa: F401

    tasks = []
    for arch in archs:
        for src in compiler.sources():
            if names and src.name not in names:
                continue
            exprs = list(src.variants)
            parts = min(jobs, len(exprs))
            if parts <= 1:
                tasks.append(CompileTask(arch, src.name))
                continue
            bounds = [round(i * len(exprs) / parts) for i in range(parts + 1)]
            tasks += [CompileTask(arch, src.name, tuple(exprs[a:b])) for a, b in zip(bounds, bounds[1:])]
    return tasks


def compile_tasks(tasks: list[CompileTask], jobs: int):
    """The results of ``tasks``, in their order (each as soon as it and those before it are
    done), from ``jobs`` processes; in this process for one."""
    if jobs == 1 or len(tasks) == 1:
        for task in tasks:
            yield run_compile_task(task)
        return
    with _pool(min(jobs, len(tasks))) as ex:
        yield from ex.map(run_compile_task, tasks)
