"""Probe (GPU, Hopper): the Hopper kernel's plain and fused-epilogue products against
torch.matmul of the same operands, at the fused layer's and the small matmul targets' shapes,
and the tf32x3 layer against torch fp32. Prints one line per row, prefixed by LABEL.

A / B between two trees (each a checkout of cupy_ops + cuda_src), alternating, same card:

    for i in 1 2; do for t in old new; do PYTHONPATH=$t python benchmarks/probe_epilogue.py $t; done; done

Session 8: the fused epilogue's bias loads (epi_load / epi_columns) and the mbarrier wait's
suspend-time hint (benchmarks/results/probe_epilogue_h100_session8.log).
"""
import sys
import torch
import cupy_ops
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import gemm

label = sys.argv[1]
torch.manual_seed(0)
rows = []
def row(name, t_ref, t):
    rows.append(f"{label:<4} {name:<34} torch {t_ref:.4f}  ours {t:.4f}  {t_ref / t:.3f}x")
    print(rows[-1], flush=True)

for dt, tf32, M, K, N, layout in [
    (torch.bfloat16, False, 1024, 8192, 8192, "K"), (torch.bfloat16, False, 4096, 4096, 4096, "K"),
    (torch.float32, True, 1024, 8192, 8192, "K"),
    (torch.bfloat16, False, 1024, 1024, 1024, "N"), (torch.bfloat16, False, 2048, 2048, 2048, "N"),
    (torch.bfloat16, False, 4096, 4096, 4096, "N"), (torch.float32, True, 1024, 1024, 1024, "N")]:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(M, K, device="cuda", dtype=dt)
    bb = torch.randn(N, K, device="cuda", dtype=dt).t() if layout == "K" else torch.randn(K, N, device="cuda", dtype=dt)
    bias = torch.randn(N, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    t_ref = time_cuda(lambda: torch.matmul(a, bb), runs=50).median
    p = gemm.plan_for(a, bb, "EpiNone", "wgmma")
    row(f"{str(dt)[6:]} {M}x{K}x{N} {layout} mm", t_ref, time_cuda(lambda: gemm.run(p, a, bb, c), runs=50).median)
    if layout == "K":
        p = gemm.plan_for(a, bb, "EpiBiasReluScale", "wgmma")
        row(f"{str(dt)[6:]} {M}x{K}x{N} {layout} fused", t_ref,
            time_cuda(lambda: gemm.run(p, a, bb, c, bias, 0.5), runs=50).median)
torch.backends.cuda.matmul.allow_tf32 = False
x = torch.randn(1024, 8192, device="cuda"); w = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, device="cuda")
t_ref = time_cuda(lambda: torch.relu(torch.nn.functional.linear(x, w, b)) / 2.0, runs=20).median
row("tf32x3 linear_relu_div 1024x8192^2", t_ref, time_cuda(lambda: cupy_ops.linear_relu_div(x, w, b, 2.0, algo="tf32x3"), runs=20).median)
