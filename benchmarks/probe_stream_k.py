"""Probe (GPU, Hopper): the persistent Hopper kernel's last partial wave as stream-K
(gemm_wgmma.cuh WgStreamK) against whole units (stream_k=False), next to torch, timed in
interleaved rounds (L2 flushed, CUDA events): shapes with the last wave nearly full (4096^3:
58 of 66 clusters), a quarter full (the fused layer 1024 x 8192 x 8192 through a K-major
weight: 62 of 66 after one wave, or the TF32 swap at 4096^3), and nearly empty (pairs at
4224 x 4096 x 4096: 8 of 66), and the max difference between the two results.

    python benchmarks/probe_stream_k.py [LABEL] [--table]

--table: the shapes where the table takes stream-K (gemm_plan.wgmma_stream_k_pays), its plan
against stream_k=False.

Session 14 (benchmarks/results/probe_stream_k_h100_session14.log).
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm

label = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "-"
torch.manual_seed(0)
CASES = [  # (name, M, K, N, dtype, b K-major (a weight), epilogue, plan overrides)
    ("bf16", 4096, 4096, 4096, torch.bfloat16, False, "EpiNone", {}),
    ("fp16", 4096, 4096, 4096, torch.float16, False, "EpiNone", {}),
    ("bf16 layer", 1024, 8192, 8192, torch.bfloat16, True, "EpiBiasReluScale", {}),
    ("tf32 swap", 4096, 4096, 4096, torch.float32, False, "EpiNone", {}),
    ("bf16 pairs", 4224, 4096, 4096, torch.bfloat16, False, "EpiNone", dict(tile_n=256, cluster=2)),
    ("bf16", 8192, 8192, 8192, torch.bfloat16, False, "EpiNone", {}),
]
TABLE_CASES = [
    ("bf16", 8192, 8192, 8192, torch.bfloat16, False, "EpiNone", {}),
    ("fp16", 6144, 6144, 6144, torch.float16, False, "EpiNone", {}),
    ("bf16 layer", 4096, 8192, 8192, torch.bfloat16, True, "EpiBiasReluScale", {}),
    ("tf32 swap", 8192, 8192, 8192, torch.float32, False, "EpiNone", {}),
    ("bf16", 2304, 4096, 4096, torch.bfloat16, False, "EpiNone", {}),
]
if "--table" in sys.argv:
    CASES = TABLE_CASES
torch.backends.cuda.matmul.allow_tf32 = True
for name, M, K, N, dtype, kmajor, epi, kw in CASES:
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    w = torch.randn(N, K, device="cuda", dtype=dtype)
    b = w.t() if kmajor else torch.randn(K, N, device="cuda", dtype=dtype)
    bias = torch.randn(N, device="cuda", dtype=dtype)
    extra = (bias, 0.5) if epi != "EpiNone" else ()
    plans = {sk: gemm.plan_for(a, b, epi, "wgmma", stream_k=sk or None if "--table" in sys.argv else sk, **kw)
             for sk in (True, False)}
    assert plans[True].stream_k, plans[True]
    outs = {sk: torch.empty(M, N, device="cuda", dtype=dtype) for sk in plans}
    if epi == "EpiNone":
        fns = {"torch": lambda: torch.matmul(a, b)}
    else:
        fns = {"torch": lambda: torch.nn.functional.linear(a, w, bias).relu_().mul_(0.5)}
    fns.update({f"sk={sk}": (lambda sk=sk: gemm.run(plans[sk], a, b, outs[sk], *extra)) for sk in plans})
    t = time_cuda_interleaved(fns, runs=100)
    diff = (outs[True].float() - outs[False].float()).abs().max().item()
    ref = fns["torch"]().float()
    err = {sk: (outs[sk].float() - ref).abs().max().item() for sk in plans}
    tr = t["torch"].median
    cols = "  ".join(f"{k} {t[k].median * 1e3:8.2f} us ({t[k].p20 * 1e3:.1f}-{t[k].p80 * 1e3:.1f}) {tr / t[k].median:.3f}x"
                     for k in fns if k != "torch")
    print(f"{label:<4} {name:<10} {M}x{K}x{N:<6} torch {tr * 1e3:8.2f} us  {cols}  |sk - whole| {diff:.3g}  "
          f"|. - torch| {err[True]:.3g} / {err[False]:.3g}  [{plans[True]}]", flush=True)
