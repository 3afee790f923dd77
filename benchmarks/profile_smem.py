"""Launches bf16 GEMMs through cupy_ops' table plan and torch.matmul (cuBLAS), each after the
benchmark's 256 MB L2 flush, for Nsight Compute's shared-memory and intake counters: does
cuBLAS read fewer shared-memory bytes per k-tile than our kernels (the wgmmas' operand reads
and the TMA's writes), and how many bytes each SM takes in (session 18,
benchmarks/results/ncu_smem_bf16_h100_session18.txt):

    ncu --clock-control none -k regex:'gemm_wgmma|nvjet' --metrics ... python benchmarks/profile_smem.py

Shapes: 1024^3 (the K-splitting kernel: 64 x 128 tiles, both warpgroups on each k-tile's
halves) and 4096^3 (persistent 128 x 256 tiles in pairs), b row-major (N-major), twice each.
"""
import torch

from cupy_ops.bench.timing import L2_FLUSH_BYTES
from cupy_ops.ops import gemm

torch.manual_seed(0)
flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
for n in (1024, 4096):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    p = gemm.plan_for(a, b, "EpiNone", "wgmma")
    print(n, p, flush=True)
    for _ in range(2):
        flush.zero_()
        gemm.run(p, a, b, c, None, 1.0)
        flush.zero_()
        torch.matmul(a, b)
torch.cuda.synchronize()
