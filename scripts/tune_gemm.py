"""Tuning experiment for the tiled fp32 GEMM (run on the GPU machine): k-tile variants of
gemm_simt.cuh against torch (cuBLAS SGEMM, TF32 off) at the KernelBench shapes."""
import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import _gemm

torch.backends.cuda.matmul.allow_tf32 = False
for M, K, N in [(4096, 4096, 4096), (1024, 8192, 8192), (1024, 1024, 1024)]:
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    w = torch.randn(N, K, device="cuda") / K**0.5
    bias = torch.randn(N, device="cuda")
    flops = 2 * M * N * K
    t_mm = time_cuda(lambda: torch.matmul(a, b), runs=30).median
    t_lin = time_cuda(lambda: torch.relu(F.linear(a, w, bias)) / 2, runs=30).median
    line = f"{M}x{K}x{N}: torch matmul {flops / t_mm / 1e9:.1f} TFLOP/s, linear {flops / t_lin / 1e9:.1f}"
    for kt in _gemm.SIMT_KTILES:
        _gemm.SIMT_KTILE = kt
        ok = torch.allclose(cupy_ops.matmul(a, b), a @ b, atol=1e-2, rtol=1e-3)
        t1 = time_cuda(lambda: cupy_ops.matmul(a, b), runs=30).median
        t2 = time_cuda(lambda: cupy_ops.linear_relu_div(a, w, bias, 2.0), runs=30).median
        line += (f" | BK={kt}: matmul {flops / t1 / 1e9:.1f} ({t_mm / t1:.2f}x{'' if ok else ' WRONG'}),"
                 f" linear {flops / t2 / 1e9:.1f} ({t_lin / t2:.2f}x)")
    print(line, flush=True)

# Tensor-core kernels (gemm_tc.cuh) against torch in the same precision.
for dtype, name in [(torch.bfloat16, "bf16"), (torch.float16, "fp16"), (torch.float32, "tf32")]:
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    for M, K, N in [(4096, 4096, 4096), (1024, 8192, 8192)]:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        w = (torch.randn(N, K, device="cuda") / K**0.5).to(dtype)
        bias = torch.randn(N, device="cuda", dtype=dtype)
        flops = 2 * M * N * K
        t_mm = time_cuda(lambda: torch.matmul(a, b), runs=30).median
        t_lin = time_cuda(lambda: torch.relu(F.linear(a, w, bias)) / 2, runs=30).median
        ok = torch.allclose(cupy_ops.matmul(a, b, algo="tc").float(), (a @ b).float(), atol=0.5, rtol=2e-2)
        t1 = time_cuda(lambda: cupy_ops.matmul(a, b, algo="tc"), runs=30).median
        t2 = time_cuda(lambda: cupy_ops.linear_relu_div(a, w, bias, 2.0, algo="tc"), runs=30).median
        print(f"{name} {M}x{K}x{N}: torch matmul {flops / t_mm / 1e9:.0f} TF, linear {flops / t_lin / 1e9:.0f} | "
              f"tc matmul {flops / t1 / 1e9:.0f} TF ({t_mm / t1:.2f}x{'' if ok else ' WRONG'}), "
              f"tc linear {flops / t2 / 1e9:.0f} TF ({t_lin / t2:.2f}x)", flush=True)
torch.backends.cuda.matmul.allow_tf32 = False
