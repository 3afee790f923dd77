"""Probe (GPU, Hopper): small outputs on the Hopper kernel, 64 x 128 tiles with the two
consumer warpgroups each over half of K (gemm_wgmma_ksplit, ksplit=True) against the
tile-width table's choice without it (ksplit=False: 128 x 64 tiles at these shapes) and torch,
timed in interleaved rounds; matmul (row-major b) and the fused layer (K-major weight). The
results against torch's (max |difference| / max |torch|).

    python benchmarks/probe_ksplit.py [DTYPE,M,K,N,mm|fused ...]   (DTYPE: bfloat16, float16, float32 = TF32)

Session 9 (benchmarks/results/probe_ksplit_h100_session9.log).
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm

CASES = [(torch.bfloat16, 1024, 1024, 1024, "mm"), (torch.float16, 1024, 1024, 1024, "mm"),
         (torch.bfloat16, 1024, 1024, 1024, "fused"), (torch.float32, 1024, 1024, 1024, "fused"),
         (torch.bfloat16, 1024, 4096, 1024, "mm"), (torch.bfloat16, 1024, 2048, 1536, "mm"),
         (torch.bfloat16, 512, 4096, 2048, "fused"), (torch.bfloat16, 1024, 512, 1024, "mm"),
         (torch.bfloat16, 2048, 1024, 1024, "mm"), (torch.bfloat16, 256, 1024, 1024, "fused")]
if len(sys.argv) > 1:
    CASES = [(getattr(torch, d), int(m), int(k), int(n), kind)
             for d, m, k, n, kind in (arg.split(",") for arg in sys.argv[1:])]
torch.backends.cuda.matmul.allow_tf32 = True
torch.manual_seed(0)
print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}")
print(f"{'case':<30} {'torch ms':>9} {'ksplit ms':>9} {'table ms':>9} {'ksplit/torch':>12} {'tbl/torch':>9}"
      f"  {'rel diff':>9}  ksplit plan")
for dt, M, K, N, kind in CASES:
    a = torch.randn(M, K, device="cuda", dtype=dt)
    if kind == "mm":
        b = torch.randn(K, N, device="cuda", dtype=dt)
        epi, extra, ref_fn = "EpiNone", (), lambda: torch.matmul(a, b)
    else:
        w = torch.randn(N, K, device="cuda", dtype=dt)
        bias = torch.randn(N, device="cuda", dtype=dt)
        b = w.t()
        epi, extra = "EpiBiasReluScale", (bias, 0.5)
        ref_fn = lambda: torch.relu(torch.nn.functional.linear(a, w, bias)) / 2
    c1, c2 = torch.empty(M, N, device="cuda", dtype=dt), torch.empty(M, N, device="cuda", dtype=dt)
    pk = gemm.plan_for(a, b, epi, "wgmma", ksplit=True)
    pn = gemm.plan_for(a, b, epi, "wgmma", ksplit=False)
    t = time_cuda_interleaved({"torch": ref_fn, "ksplit": lambda: gemm.run(pk, a, b, c1, *extra),
                               "narrow": lambda: gemm.run(pn, a, b, c2, *extra)}, runs=200)
    ref = ref_fn().float()
    gemm.run(pk, a, b, c1, *extra)
    rel = ((c1.float() - ref).abs().max() / ref.abs().max()).item()
    tk, tn, tr = t["ksplit"].median, t["narrow"].median, t["torch"].median
    name = f"{str(dt)[6:]} {M}x{K}x{N} {kind}"
    print(f"{name:<30} {tr:9.4f} {tk:9.4f} {tn:9.4f} {tr / tk:11.3f}x {tr / tn:8.3f}x  {rel:9.2e}  {pk}", flush=True)
