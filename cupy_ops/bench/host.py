"""Host overhead per eager call, measured on tiny tensors where the GPU is idle.

Each function is called ``calls`` times back to back; the wall time per call (after a final
synchronize) is the host cost, because a 4096-element kernel finishes long before the host
can issue the next one. torch and cupy_ops loops are interleaved over several rounds (so
drifts of the machine hit both alike) and the median per function is kept. Run it in a fresh
process (``python -m cupy_ops.bench.host``): a process that has run torch.compile and large
benchmarks measures slower host paths for everyone.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from .timing import gpu_problem


def per_call_us(fn, calls: int = 2000, repeats: int = 7) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def measure(numel: int = 4096, dtype=torch.float32, rounds: int = 9) -> dict[str, float]:
    """Microseconds per call for torch and cupy_ops, relu and relu / 2, on ``numel`` elements."""
    import cupy_ops

    x = torch.randn(numel, device="cuda", dtype=dtype)
    fns = {
        "torch.relu(x)": lambda: torch.relu(x),
        "cupy_ops.relu(x)": lambda: cupy_ops.relu(x),
        "torch.relu(x) / 2": lambda: torch.relu(x) / 2.0,
        "cupy_ops.relu_div(x, 2)": lambda: cupy_ops.relu_div(x, 2.0),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
    }
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(per_call_us(fn, calls=2000, repeats=1))
    return {k: statistics.median(v) for k, v in samples.items()}


def format_table(us: dict[str, float]) -> str:
    lines = [f"  {name:<28} {v:6.2f} us" for name, v in us.items()]
    lines.append(f"  relu vs torch.relu: {us['cupy_ops.relu(x)'] / us['torch.relu(x)']:.2f}x; relu_div vs "
                 f"torch.relu(x) / 2: {us['cupy_ops.relu_div(x, 2)'] / us['torch.relu(x) / 2']:.2f}x")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupy_ops.bench.host", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--numel", type=int, default=4096, help="elements of the fp32 input (default 4096)")
    p.add_argument("--rounds", type=int, default=9, help="interleaved rounds; the median is kept (default 9)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    args = p.parse_args(argv)
    problem = gpu_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    result = measure(args.numel, rounds=args.rounds)
    print(json.dumps(result) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
