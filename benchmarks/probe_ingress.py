"""Probe (GPU, Hopper): is the K-splitting kernel's streaming bound per SM or by what the SMs
share? Timelines (probe_timeline.py; needs benchmarks/results/timeline_session17.diff) of the
table's plan at K = 1024 with 128, 64, 32 and 16 CTAs (M = 1024, 512, 256, 128; N = 1024): if a
k-tile's data arrives as often with fewer CTAs, the limit is each SM's; if sooner, the L2 /
DRAM side.

    python benchmarks/probe_ingress.py [reps]
"""
import sys

import torch

from cupy_ops.ops import gemm
import probe_timeline as tl
from gemm_cases import operands

tl.reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
gemm.KERNELS.update({"gemm_wgmma_ksplit": tl.build("gemm_wgmma_ksplit", tl.KS, WG_TIMELINE=1)})
for M in (1024, 512, 256, 128):
    for K in (1024, 4096):
        a, b, bias = operands(torch.bfloat16, M, K, 1024, "N")
        c = torch.empty(M, 1024, device="cuda", dtype=torch.bfloat16)
        p = gemm.plan_for(a, b, "EpiNone", "wgmma", ksplit=True)
        tl.timeline(f"bf16 {M}x{K}x1024 ({p.grid[0]} CTAs)", p, a, b, c)
gemm.KERNELS.update(tl.TABLE)
