"""Probe (GPU, Hopper): TF32 matmul with a row-major b, the swapped kernel (C^T = B^T A^T,
gemm_wgmma_swap) against the transpose pass + gemm_wgmma (swap=False) and torch's TF32 matmul,
timed in interleaved rounds; and their results against each other (max |difference| relative
to max |torch|, and whether the two paths agree bit for bit).

    python benchmarks/probe_swap.py [M,K,N ...]

Session 9 (benchmarks/results/probe_swap_h100_session9.log).
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm

SHAPES = [(4096, 4096, 4096), (1024, 1024, 1024), (2048, 2048, 2048), (1024, 8192, 8192), (8192, 8192, 8192),
          (4096, 1024, 4096)]
shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[1:]] or SHAPES
torch.backends.cuda.matmul.allow_tf32 = True
torch.manual_seed(0)
print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}")
print(f"{'M x K x N':<18} {'torch ms':>9} {'swap ms':>9} {'transp ms':>9} {'swap/torch':>10} {'transp/torch':>12}"
      f"  {'rel diff':>9}  bits   swap plan")
for M, K, N in shapes:
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    c1, c2 = torch.empty(M, N, device="cuda"), torch.empty(M, N, device="cuda")
    p_swap = gemm.plan_for(a, b, "EpiNone", "wgmma")
    p_tr = gemm.plan_for(a, b, "EpiNone", "wgmma", swap=False)
    t = time_cuda_interleaved({"torch": lambda: torch.matmul(a, b), "swap": lambda: gemm.run(p_swap, a, b, c1),
                               "transpose": lambda: gemm.run(p_tr, a, b, c2)}, runs=100)
    ref = a @ b
    gemm.run(p_swap, a, b, c1)
    gemm.run(p_tr, a, b, c2)
    rel = ((c1 - ref).abs().max() / ref.abs().max()).item()
    same = torch.equal(c1, c2)
    ts, tt, tr = t["swap"].median, t["transpose"].median, t["torch"].median
    print(f"{f'{M}x{K}x{N}':<18} {tr:9.4f} {ts:9.4f} {tt:9.4f} {tr / ts:9.3f}x {tr / tt:11.3f}x  {rel:9.2e}  "
          f"{'same' if same else 'diff'}   {p_swap}", flush=True)
