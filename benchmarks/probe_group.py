"""Probe (GPU, Hopper): the persistent kernel's tile-walk group height (WgWalk, cluster rows per
group; the table's WG_GROUP) swept at the large shapes, timed in interleaved rounds (L2 flushed)
against torch. A runtime argument: one build.

    python benchmarks/probe_group.py [rounds]
"""
import dataclasses
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm
from gemm_cases import case_name, prepared

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
GROUPS = (1, 2, 4, 8, 16, 32)
torch.manual_seed(0)
SHAPES = [(torch.bfloat16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.float16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.float32, True, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.bfloat16, False, 8192, 8192, 8192, "N", "EpiNone"),
          (torch.bfloat16, False, 6144, 6144, 6144, "N", "EpiNone")]
for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES, rounds):
    p = gemm.plan_for(a, b, epi, "wgmma")
    for g in GROUPS:
        q = dataclasses.replace(p, group=g)
        fns[f"g{g}"] = lambda q=q: gemm.run(q, a, b, c, bias, 0.5)
    t = time_cuda_interleaved(fns, runs=100)
    tr = t["torch"].median
    name = case_name(dt, tf32, M, K, N, layout)
    print(f"{name:26s} torch {tr * 1e3:7.1f} us  " +
          "  ".join(f"g{g} {tr / t[f'g{g}'].median:5.3f}x" for g in GROUPS) + f"  [{p.kernel}, group {p.group}]",
          flush=True)
