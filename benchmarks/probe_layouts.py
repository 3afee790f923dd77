"""Probe (GPU, Hopper): the Hopper kernel's speed by B layout and epilogue at equal FLOPs.

For each shape, torch.matmul and the Hopper kernel with B row-major (N-major, matmul's b), B
K-major (nn.Linear's weight.T) and K-major with the fused epilogue (bias, ReLU, scale), under
the plan's table and under tile-walk groups of 1, 2, 4 and 16 cluster rows and one CTA per
tile. Session 7: isolated the fused epilogue's cost (bias loads waiting on the stores).

    python benchmarks/probe_layouts.py | tee benchmarks/results/probe_layouts_<gpu>.log
"""
import torch

from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import gemm

torch.manual_seed(0)
dt = torch.bfloat16
print(describe(environment()))
print("ms and ratio to torch.matmul of the same operands (the fused rows: to the plain product)")
for M, K, N in [(1024, 8192, 8192), (4096, 4096, 4096), (2048, 8192, 8192)]:
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b_n = torch.randn(K, N, device="cuda", dtype=dt)
    w = torch.randn(N, K, device="cuda", dtype=dt)
    b_k = w.t()
    bias = torch.randn(N, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    for name, bb, epi in (("N-major mm", b_n, "EpiNone"), ("K-major mm", b_k, "EpiNone"),
                          ("K-major fused", b_k, "EpiBiasReluScale")):
        t_ref = time_cuda(lambda: torch.matmul(a, bb), runs=30).median
        cells = []
        for kw in ({}, dict(group=1), dict(group=2), dict(group=4), dict(group=16), dict(cluster=1, persistent=False)):
            p = gemm.plan_for(a, bb, epi, "wgmma", **kw)
            t = time_cuda(lambda: gemm.run(p, a, bb, c, bias, 0.5), runs=30).median
            cells.append(f"{t:.4f} {t_ref / t:.3f}x")
        print(f"{M}x{K}x{N} {name:<14} torch mm {t_ref:.4f} | table, g1, g2, g4, g16, cl1: " + "  ".join(cells),
              flush=True)
