"""Benchmark and correctness harness (KernelBench's method), used by ``examples/`` and
``python -m cupy_ops.bench``."""
from .timing import Stats, gpu_problem, time_cuda

__all__ = ["Stats", "gpu_problem", "time_cuda"]
