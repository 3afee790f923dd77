"""Benchmark and correctness harness (KernelBench's method), used by ``examples/`` and
``python -m cupy_ops.bench``."""

from ._shadow import restore

restore()  # before anything below reads the package: see _shadow

from .timing import Stats, gpu_problem, time_cuda  # noqa: E402

__all__ = ["Stats", "gpu_problem", "time_cuda"]
