"""Fill the kernel cache ahead of time: every built-in kernel variant compiled by NVRTC for
the given GPUs, in parallel processes (``python -m cupy_ops warm``).

A variant is otherwise compiled on its first launch, one at a time (the Hopper GEMM variants
take seconds each); a warm cache makes every first call a disk read. Needs NVRTC, not a GPU:
the architectures come from the compute capabilities asked for.
"""
from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass


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
        device_arch = "sm_%d%d" % cap
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


def warm(capabilities, workers: int) -> list[Warmed]:
    """Compile every built-in variant for ``capabilities`` into the kernel cache with
    ``workers`` (>= 1) processes (spawned: none of them touches CUDA). One ``Warmed`` per
    variant."""
    jobs = jobs_for(capabilities)
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        return list(ex.map(_one, jobs))
