"""Launch each GEMM kernel family once at the KernelBench shapes, for Nsight Compute:

    ncu --clock-control none --launch-skip 0 -k regex:'simt|wgmma|tf32x3' --section SpeedOfLight \\
        --section ComputeWorkloadAnalysis --section WarpStateStats python benchmarks/profile_gemm.py

(cuBLAS's own kernels run too, as the reference: profile them with -k regex:'gemm|xmma'.)
"""

import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.bench.env import describe, environment

torch.manual_seed(0)
print(describe(environment()))
for dtype, tf32 in ((torch.float32, False), (torch.bfloat16, False), (torch.float32, True)):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(4096, 4096, device="cuda", dtype=dtype)
    x = torch.randn(1024, 8192, device="cuda", dtype=dtype)
    w = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    bias = torch.randn(8192, device="cuda", dtype=dtype)
    cupy_ops.matmul(a, a)
    torch.matmul(a, a)
    cupy_ops.linear_relu_div(x, w, bias, 2.0)
    torch.relu(F.linear(x, w, bias)) / 2
    if dtype == torch.float32 and not tf32 and torch.cuda.get_device_capability() == (9, 0):
        cupy_ops.matmul(a, a, algo="tf32x3")
        cupy_ops.linear_relu_div(x, w, bias, 2.0, algo="tf32x3")
    torch.cuda.synchronize()
    print(
        dtype,
        "tf32" if tf32 else "",
        "matmul:",
        cupy_ops.gemm_plan(a, a),
        "| linear:",
        cupy_ops.gemm_plan(x, w.t(), bias_relu_scale=True),
    )
