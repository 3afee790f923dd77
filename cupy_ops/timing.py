"""GPU timing the KernelBench way: CUDA events, warm-up, L2 flush before each run, median.

In the core package so that autotuning (``cupy_ops.autotune``) and the benchmarks time alike;
``cupy_ops.bench.timing`` gives these to the bench."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

# KernelBench flushes L2 by filling a 256 MB buffer before each timed run; larger than the
# L2 of any current GPU (50 MB on H100, 60 MB on H200).
L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass
class Stats:
    """Timing of one function: milliseconds per run."""

    median: float
    p20: float
    p80: float
    runs: int

    def __str__(self) -> str:
        return f"{self.median:.4f} ms (p20 {self.p20:.4f}, p80 {self.p80:.4f}, {self.runs} runs)"


def _quantile(sorted_vals: list[float], q: float) -> float:
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = q * (len(sorted_vals) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def _timed_runs(fn, runs: int, flush, *, stop_after: float | None = None, min_runs: int = 1) -> list[float]:
    """``runs`` timed calls of ``fn`` (ms each, CUDA events), ``flush`` zeroed before each;
    stops early once ``stop_after`` seconds have passed and ``min_runs`` calls were timed."""
    times: list[float] = []
    start_wall = time.perf_counter()
    for i in range(runs):
        if flush is not None:
            flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
        if stop_after is not None and i + 1 >= min_runs and time.perf_counter() - start_wall > stop_after:
            break
    return times


def _stats(times: list[float]) -> Stats:
    times = sorted(times)
    return Stats(statistics.median(times), _quantile(times, 0.2), _quantile(times, 0.8), len(times))


def _flush_buffer(flush_l2: bool, device):
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    return device, (torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device) if flush_l2 else None)


def time_cuda(
    fn,
    *,
    warmup: int = 3,
    runs: int = 100,
    flush_l2: bool = True,
    max_seconds: float | None = None,
    min_runs: int = 5,
    device=None,
) -> Stats:
    """Time ``fn()`` on the current CUDA stream with events, one event pair per run.

    ``warmup`` untimed calls first (compiles, autotunes, allocates). Before each timed run the
    L2 cache is flushed (untimed). ``max_seconds`` stops early, after at least ``min_runs``
    runs, for slow functions. Returns the median and the 20th/80th percentiles in ms.
    """
    device, flush = _flush_buffer(flush_l2, device)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    return _stats(_timed_runs(fn, runs, flush, stop_after=max_seconds, min_runs=min_runs))


def time_cuda_interleaved(
    fns: dict,
    *,
    warmup: int = 3,
    runs: int = 100,
    rounds: int = 5,
    flush_l2: bool = True,
    max_seconds: float | None = None,
    min_runs: int = 5,
    device=None,
) -> dict:
    """``time_cuda`` of several functions against each other: ``{name: Stats}``. The runs
    are taken in ``rounds`` rounds, each timing every function ``runs / rounds`` times in
    turn, so a drift of the GPU's clocks during the measurement falls on all of them alike;
    timed one after another, it fell on whichever ran then (H100: rows timed after
    a slow kernel spread 1.1-3x between their 20th and 80th percentiles). ``max_seconds`` is
    per function, over all rounds (a function past it sits out the later rounds once it has
    ``min_runs`` runs)."""
    device, flush = _flush_buffer(flush_l2, device)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize(device)
    per_round = max(1, -(-runs // rounds))
    times: dict = {name: [] for name in fns}
    spent = dict.fromkeys(fns, 0.0)
    for _ in range(rounds):
        for name, fn in fns.items():
            left = None if max_seconds is None else max_seconds - spent[name]
            if left is not None and left <= 0 and len(times[name]) >= min_runs:
                continue
            start = time.perf_counter()
            times[name] += _timed_runs(
                fn, per_round, flush, stop_after=left, min_runs=max(1, min_runs - len(times[name]))
            )
            spent[name] += time.perf_counter() - start
    return {name: _stats(t) for name, t in times.items()}
