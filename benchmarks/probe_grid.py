"""Probe (GPU, Hopper): the persistent grid at whole waves. The plan's persistent grid is
min(units, the clusters that run at once): at bf16 4096^3, 256 units (pairs of 128 x 256
tiles) on 66 clusters, 3.88 waves, the last with 8 clusters idle. Variant "whole" launches
the same kernel on cdiv(units, waves) clusters (64 there: 4 units each, 4 SMs idle
throughout): the same number of units per cluster at most, fewer SMs drawing power and L2
bandwidth, another set of units running side by side. "gN": "whole" with tile walk group N.
Each line: ours against torch in interleaved rounds (L2 flushed), results checked bit-equal
against the table's plan (the grid changes only which cluster computes a unit).

    PYTHONPATH=. python benchmarks/probe_grid.py [label]
"""
import dataclasses
import sys

import torch

from cupy_ops import launch
from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm, gemm_plan

label = sys.argv[1] if len(sys.argv) > 1 else "-"
cdiv = gemm_plan.cdiv


def whole(p, M, N):
    """``p`` with its persistent grid at whole waves: cdiv(units, waves) clusters."""
    Mk, Nk = (N, M) if p.swap else (M, N)
    units = cdiv(cdiv(Mk, gemm_plan.WG_BM), p.cluster) * cdiv(Nk, p.tile[1]) * p.slices
    h = gemm._handle(p.kernel, 0)
    clusters = min(units, max(launch.resident_clusters(h, p.cluster, p.block, p.smem), 1))
    waves = cdiv(units, clusters)
    return dataclasses.replace(p, grid=(p.cluster * cdiv(units, waves), 1, 1)), units, clusters


torch.manual_seed(0)
# (dtype, M, K, N, b layout, groups to try at whole waves)
SHAPES = [(torch.bfloat16, 4096, 4096, 4096, "N", (4, 16)),
          (torch.float16, 4096, 4096, 4096, "N", ()),
          (torch.bfloat16, 1024, 8192, 8192, "K", ()),
          (torch.bfloat16, 2304, 4096, 4096, "N", ()),
          (torch.bfloat16, 6144, 6144, 6144, "N", ()),
          (torch.bfloat16, 8192, 8192, 8192, "N", ()),
          (torch.float32, 4096, 4096, 4096, "N", ())]
for dt, M, K, N, layout, groups in SHAPES:
    torch.backends.cuda.matmul.allow_tf32 = dt == torch.float32
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(N, K, device="cuda", dtype=dt).t() if layout == "K" else torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    table = gemm.plan_for(a, b, "EpiNone", "wgmma")
    if not table.persistent:
        print(f"{label} {M}x{K}x{N}: not persistent ({table})")
        continue
    plans = {"table": table}
    plans["whole"], units, clusters = whole(table, M, N)
    for g in groups:
        plans[f"g{g}"] = whole(gemm.plan_for(a, b, "EpiNone", "wgmma", group=g), M, N)[0]
    fns = {"torch": lambda: torch.matmul(a, b)}
    ref = None
    for k, p in plans.items():
        fns[k] = lambda p=p: gemm.run(p, a, b, c)
        fns[k]()
        ref = c.clone() if ref is None else ref
        assert torch.equal(c, ref), f"{k} differs from the table's plan"
    t = time_cuda_interleaved(fns, runs=300, rounds=10)
    tr = t["torch"].median
    name = f"{'tf32' if dt == torch.float32 else str(dt)[6:]} {M}x{K}x{N} {layout}"
    for k, p in plans.items():
        print(f"{label:<3} {name:<26} {k:<6} grid {p.grid[0]:>3} ({units} units, {clusters} clusters at once) "
              f"torch {tr * 1e3:8.2f} us  ours {t[k].median * 1e3:8.2f} us  {tr / t[k].median:.3f}x", flush=True)
