"""Launches bf16 4096^3 (N-major b) twice each through cupy_ops' table plan (gemm_wgmma, the
epilogue built as WG_EPI_PROBE says: 0 full, 1 none; the switch exists in the scratch tree of
benchmarks/results/epilogue_parts_session16.diff), the same with single CTAs (cluster=1), and
torch.matmul (cuBLAS), for Nsight Compute's memory metrics
(benchmarks/results/ncu_l2_bf16_4096_h100_session16.txt):

    ncu --launch-skip 4 --launch-count 4 -k regex:'gemm_wgmma|nvjet' --metrics ... python benchmarks/profile_l2.py
"""
import torch

from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan

exprs = [e for e in gemm_plan.variants()["gemm_sm90a.cu"] if e.startswith("gemm_wgmma<")]
kern = {m: Kernel.builtin("gemm_sm90a.cu", "gemm_wgmma", exprs, arch="sm_90a",
                          defines=dict(gemm_plan.SM90A_DEFINES, WG_EPI_PROBE=m)) for m in (0, 1)}
torch.manual_seed(0)
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
c = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
p = gemm.plan_for(a, b, "EpiNone", "wgmma")
p1 = gemm.plan_for(a, b, "EpiNone", "wgmma", cluster=1, persistent=True)
print(p, p1, sep="\n")
for _ in range(2):
    for m in (0, 1):
        gemm.KERNELS["gemm_wgmma"] = kern[m]
        gemm.run(p, a, b, c, None, 1.0)
    gemm.KERNELS["gemm_wgmma"] = kern[0]
    gemm.run(p1, a, b, c, None, 1.0)
    torch.matmul(a, b)
torch.cuda.synchronize()
