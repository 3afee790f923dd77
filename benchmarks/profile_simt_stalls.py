"""Nsight Compute target: one fp32 4096^3 matmul by the SIMT kernel and one by cuBLAS, for the
stall-reason comparison of docs/tuning.md (SIMT run 8):

    ncu --clock-control none -k regex:'simt|gemm' \\
        --metrics regex:'smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio' \\
        python benchmarks/profile_simt_stalls.py
"""
import torch

import cupy_ops

torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(4096, 4096, device="cuda")
b = torch.randn(4096, 4096, device="cuda")
cupy_ops.matmul(a, b)
torch.matmul(a, b)
torch.cuda.synchronize()
