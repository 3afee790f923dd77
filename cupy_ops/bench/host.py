"""Host overhead per eager call, measured on tiny tensors where the GPU is idle.

Each function is called ``calls`` times back to back; the wall time per call (after a final
synchronize) is the host cost, because a 4096-element kernel finishes long before the host
can issue the next one. Median of ``repeats`` such loops.
"""
from __future__ import annotations

import statistics
import time

import torch


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


def measure(numel: int = 4096, dtype=torch.float32) -> dict[str, float]:
    """Microseconds per call for torch and cupy_ops, relu and relu / 2, on ``numel`` elements."""
    import cupy_ops

    x = torch.randn(numel, device="cuda", dtype=dtype)
    return {
        "torch.relu(x)": per_call_us(lambda: torch.relu(x)),
        "cupy_ops.relu(x)": per_call_us(lambda: cupy_ops.relu(x)),
        "torch.relu(x) / 2": per_call_us(lambda: torch.relu(x) / 2.0),
        "cupy_ops.relu_div(x, 2)": per_call_us(lambda: cupy_ops.relu_div(x, 2.0)),
        "torch.empty_like(x)": per_call_us(lambda: torch.empty_like(x)),
    }


if __name__ == "__main__":
    for name, us in measure().items():
        print(f"{name:<28} {us:7.2f} us")
