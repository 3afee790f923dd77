"""Probe (GPU, Hopper): what a 2-CTA cluster costs the Hopper kernel at small shapes. The same
128 x 128 tiles run as one CTA per tile (cluster 1) and as pairs sharing B (cluster 2, one
pair per two tiles, and persistent), next to the table's plan and torch, timed in interleaved
rounds. Prints one line per shape, prefixed by LABEL (A / B between two trees, as
probe_epilogue.py).

    PYTHONPATH=tree python benchmarks/probe_cluster.py LABEL

Session 9 (benchmarks/results/probe_cluster_h100_session9.log).
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm

label = sys.argv[1] if len(sys.argv) > 1 else "-"
VARIANTS = {"table": {}, "cl1": dict(tile_n=128, cluster=1, persistent=False, split_k=False),
            "cl2": dict(tile_n=128, cluster=2, persistent=False, split_k=False),
            "cl2p": dict(tile_n=128, cluster=2, persistent=True, split_k=False)}
torch.manual_seed(0)
for M, K, N in [(1024, 1024, 1024), (1024, 4096, 1024), (2048, 2048, 2048), (4096, 4096, 4096)]:
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    plans = {k: gemm.plan_for(a, b, "EpiNone", "wgmma", **kw) for k, kw in VARIANTS.items()}
    fns = {"torch": lambda: torch.matmul(a, b)}
    fns.update({k: (lambda p=p: gemm.run(p, a, b, c)) for k, p in plans.items()})
    t = time_cuda_interleaved(fns, runs=200)
    tr = t["torch"].median
    cols = "  ".join(f"{k} {t[k].median * 1e3:7.2f} us {tr / t[k].median:.3f}x" for k in VARIANTS)
    print(f"{label:<4} bf16 {M}x{K}x{N:<6} torch {tr * 1e3:7.2f} us  {cols}", flush=True)
