"""Probe (GPU, Hopper): where the K-splitting kernel (gemm_wgmma_ksplit, ksplit=True) stands
against the table's plan (split-K or 128-wide tiles) at the shapes its rule leaves out (more
than WG_KSPLIT_MAX_KTILES k-tiles, a wave of tiles), timed in interleaved rounds (L2 flushed)
against torch. Session 16: after its ring grew from 7 to 9 stages.

    python benchmarks/probe_ksplit_reach.py [rounds]
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm
from gemm_cases import case_name, prepared

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.manual_seed(0)
# (dtype, TF32 on, M, K, N, b layout: "N" row-major (K, N), "K" the nn.Linear weight's, epilogue)
SHAPES = [(torch.bfloat16, False, 128, 4096, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 256, 4096, 512, "N", "EpiNone"),
          (torch.bfloat16, False, 64, 8192, 256, "N", "EpiNone"),
          (torch.bfloat16, False, 512, 2048, 1024, "K", "EpiBiasReluScale"),
          (torch.float32, True, 128, 4096, 1024, "K", "EpiBiasReluScale"),
          (torch.float32, True, 256, 2048, 1024, "K", "EpiBiasReluScale"),
          (torch.bfloat16, False, 2048, 1024, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 2048, 1536, "N", "EpiNone")]
for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES, rounds):
    plans = {"table": gemm.plan_for(a, b, epi, "wgmma"), "ksplit": gemm.plan_for(a, b, epi, "wgmma", ksplit=True)}
    for k, p in plans.items():
        fns[k] = lambda p=p: gemm.run(p, a, b, c, bias, 0.5)
    t = time_cuda_interleaved(fns, runs=200)
    tr = t["torch"].median
    name = case_name(dt, tf32, M, K, N, layout)
    print(f"{name:24s} torch {tr * 1e3:7.2f} us  " + "  ".join(
        f"{k} {t[k].median * 1e3:7.2f} {tr / t[k].median:5.3f}x" for k in plans) + f"  [{plans['table'].kernel}"
        f"{', split ' + str(plans['table'].slices) if plans['table'].slices > 1 else ''}]", flush=True)
