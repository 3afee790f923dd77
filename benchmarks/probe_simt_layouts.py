"""Probe (GPU): the fp32 SIMT GEMM as the plan launches it (gemm.plan_for(..., "simt")) for
every operand layout - A K-major (row-major) or M-major (a transposed view), B N-major
(row-major) or K-major (the nn.Linear weight's transpose) - plain and with the fused epilogue,
against torch (TF32 off) in interleaved rounds, at the KernelBench shapes. Prints one line per
row, prefixed by LABEL; each result is checked against torch's (max |diff| / max |ref|).

A / B between two trees (each a checkout of cupy_ops + cuda_src), alternating, same card:

    for i in 1 2; do for t in old new; do PYTHONPATH=$t python benchmarks/probe_simt_layouts.py $t; done; done

Session 10: blocks per SM and dynamic shared memory by layout (gemm_plan.SIMT_OCCUPANCY;
benchmarks/results/probe_simt_h100_session10.log).
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm

label = sys.argv[1] if len(sys.argv) > 1 else "run"
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
for M, K, N in [(4096, 4096, 4096), (1024, 8192, 8192)]:
    for a_layout in "KM":
        a = torch.randn(M, K, device="cuda") if a_layout == "K" else torch.randn(K, M, device="cuda").t()
        for b_layout in "NK":
            b = torch.randn(K, N, device="cuda") if b_layout == "N" else torch.randn(N, K, device="cuda").t()
            bias = torch.randn(N, device="cuda")
            c = torch.empty(M, N, device="cuda")
            for epi in ("EpiNone", "EpiBiasReluScale"):
                if epi == "EpiNone":
                    ref_fn, extra = (lambda: torch.matmul(a, b)), ()
                else:
                    ref_fn, extra = (lambda: torch.relu(torch.addmm(bias, a, b)) / 2.0), (bias, 0.5)
                p = gemm.plan_for(a, b, epi, "simt")
                t = time_cuda_interleaved({"torch": ref_fn, "ours": lambda: gemm.run(p, a, b, c, *extra)},
                                          runs=20, max_seconds=2)
                ref = ref_fn()
                rel = ((c - ref).abs().max() / ref.abs().max()).item()
                tr, to = t["torch"].median, t["ours"].median
                print(f"{label:<4} {M}x{K}x{N} A {a_layout}-major B {b_layout}-major {epi:<16} torch {tr:.4f} "
                      f"ours {to:.4f} {tr / to:.3f}x  rel diff {rel:.1e}  {p.kernel}", flush=True)
