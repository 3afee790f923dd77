"""Probe (GPU, Hopper): fp32 matmul with a row-major b, the swapped kernels (C^T = B^T A^T:
gemm_wgmma_swap for TF32, gemm_tf32x3_swap for 3xTF32) against the transpose pass + the
unswapped kernel (swap=False) and torch (TF32 for "wgmma", fp32 for "tf32x3"), timed in
interleaved rounds; and their results against each other (max |difference| relative to max
|torch|, and whether the two paths agree bit for bit).

    python benchmarks/probe_swap.py [wgmma|tf32x3] [M,K,N ...]

Session 9 (benchmarks/results/probe_swap_h100_session9.log).
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm

SHAPES = [(4096, 4096, 4096), (1024, 1024, 1024), (2048, 2048, 2048), (1024, 8192, 8192), (8192, 8192, 8192),
          (4096, 1024, 4096)]
algo = sys.argv[1] if len(sys.argv) > 1 else "wgmma"
shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[2:]] or SHAPES
torch.backends.cuda.matmul.allow_tf32 = algo == "wgmma"   # torch's TF32 against ours; fp32 against 3xTF32
torch.manual_seed(0)
print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  algo {algo}")
print(f"{'M x K x N':<18} {'torch ms':>9} {'swap ms':>9} {'transp ms':>9} {'swap/torch':>10} {'transp/torch':>12}"
      f"  max|err|/max|ref| vs fp64: swap, transp, torch  bits   swap plan")
for M, K, N in shapes:
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    c1, c2 = torch.empty(M, N, device="cuda"), torch.empty(M, N, device="cuda")
    p_swap = gemm.plan_for(a, b, "EpiNone", algo)
    p_tr = gemm.plan_for(a, b, "EpiNone", algo, swap=False)
    t = time_cuda_interleaved({"torch": lambda: torch.matmul(a, b), "swap": lambda: gemm.run(p_swap, a, b, c1),
                               "transpose": lambda: gemm.run(p_tr, a, b, c2)}, runs=100)
    ref = a.double() @ b.double()
    gemm.run(p_swap, a, b, c1)
    gemm.run(p_tr, a, b, c2)
    err = [((c - ref).abs().max() / ref.abs().max()).item() for c in (c1, c2, a @ b)]
    same = torch.equal(c1, c2)
    ts, tt, tr = t["swap"].median, t["transpose"].median, t["torch"].median
    print(f"{f'{M}x{K}x{N}':<18} {tr:9.4f} {ts:9.4f} {tt:9.4f} {tr / ts:9.3f}x {tr / tt:11.3f}x  "
          f"{err[0]:.2e} {err[1]:.2e} {err[2]:.2e}  {'same' if same else 'diff'}   {p_swap}", flush=True)
