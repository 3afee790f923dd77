"""Experiment (GPU): variants of the tiled fp32 GEMM (gemm_simt.cuh) built through the public
cupy_ops.Kernel API with different register caps (blocks per SM), timed against torch's SGEMM
(TF32 off) in this process at the KernelBench shapes. The geometry defines are the plan's
(cupy_ops/ops/gemm/geometry.py DEFINES), written into the source (docs/gemm.md#simt-occupancy).

    python benchmarks/tune_simt.py | tee tune_simt.log
"""

import torch

import cupy_ops
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops.gemm.geometry import DEFINES

SRC = (
    "".join(f"#define {k} {v}\n" for k, v in DEFINES.items())
    + """
#include "gemm_simt.cuh"
#include "gemm_epilogue.cuh"
__global__ void __launch_bounds__(SG_THREADS, {mb}) mm(const float* a, long long lda, const float* b,
                                                       long long ldb, float* c, int M, int N, int K, int vec) {{
  gemm_simt_block<true, {bkm}, SG_BK, false>(a, lda, b, ldb, c, N, M, N, K, vec, Epilogue<float, EpiNone>(nullptr, 1.0));
}}
"""
)

torch.backends.cuda.matmul.allow_tf32 = False
print(describe(environment()))
# (min blocks per SM, B K-major: the nn.Linear weight layout, else row-major as matmul's b)
CONFIGS = [(1, False), (2, False), (1, True), (2, True)]
variants = {c: cupy_ops.Kernel(SRC.format(mb=c[0], bkm="true" if c[1] else "false"), "mm") for c in CONFIGS}
for M, K, N in [(4096, 4096, 4096), (1024, 8192, 8192)]:
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    c = torch.empty(M, N, device="cuda")
    flops = 2 * M * N * K
    t_ref = time_cuda(lambda: torch.matmul(a, b), runs=40).median
    line = f"{M}x{K}x{N}: torch {flops / t_ref / 1e9:.1f} TF"
    bt = b.t().contiguous()
    for (mb, bkm), k in variants.items():

        def run():
            k(
                a,
                K,
                bt if bkm else b,
                K if bkm else N,
                c,
                M,
                N,
                K,
                3,
                grid=(cupy_ops.cdiv(N, 128), cupy_ops.cdiv(M, 128)),
                block=256,
            )

        run()
        ok = torch.allclose(c, a @ b, atol=1e-2, rtol=1e-3)
        t = time_cuda(run, runs=40).median
        line += f" | minblocks={mb} B {'K' if bkm else 'N'}-major: {flops / t / 1e9:.1f} TF ({t_ref / t:.3f}x{'' if ok else ' WRONG'})"
    print(line, flush=True)
