"""Probe (GPU): variants of the tiled fp32 GEMM (gemm_simt.cuh) against each other and torch's
SGEMM (TF32 off), timed in interleaved rounds in this process: how the shared-memory tiles are
declared (DYN_SMEM: static arrays or dynamic shared memory; the same layout and arithmetic, but
ptxas schedules the fragment loads differently at the 128-register cap) and blocks per SM
(the __launch_bounds__ minimum: 1, or 2 at 128 registers), at the KernelBench shapes with both
layouts of B: matmul 4096^3 (row-major b, N-major) and the layer 1024x8192x8192 (the
nn.Linear weight, K-major). Each variant's result is checked against torch's (max |diff| /
max |ref|), so a broken variant cannot pass as fast.

    python benchmarks/probe_simt.py [--fused] [--a-m-major] [DYN,MINBLOCKS ...]   (DYN: 0 static, 1 dynamic)

--fused: with the fused epilogue (bias, ReLU, scale 0.5), checked against torch's layer;
--a-m-major: a as a transposed view (M-major).

Session 10 (benchmarks/results/probe_simt_h100_session10.log).
"""
import sys

import torch

import cupy_ops
from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops.gemm_plan import DEFINES

SRC = "".join(f"#define {k} {v}\n" for k, v in DEFINES.items()) + """
#include "gemm_simt.cuh"
#include "gemm_epilogue.cuh"
__global__ void __launch_bounds__(SG_THREADS, {mb}) mm(const float* a, long long lda, const float* b,
                                                       long long ldb, float* c, int M, int N, int K, int vec,
                                                       const float* bias) {{
  gemm_simt_block<{akm}, {bkm}, SG_BK, {dyn}>(a, lda, b, ldb, c, N, M, N, K, vec,
                                            Epilogue<float, {epi}>(reinterpret_cast<const u32*>(bias), 0.5));
}}
"""
FUSED = "--fused" in sys.argv
A_M_MAJOR = "--a-m-major" in sys.argv
ARGS = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
CONFIGS = [tuple(int(x) for x in arg.split(",")) for arg in ARGS] or [(0, 1), (0, 2), (1, 1), (1, 2)]
SHAPES = [(4096, 4096, 4096, False), (4096, 4096, 4096, True), (1024, 8192, 8192, True), (1024, 8192, 8192, False)]
SMEM = DEFINES["SG_SMEM_BYTES"]


def source(c, bkm):
    return SRC.format(dyn="true" if c[0] else "false", mb=c[1], bkm="true" if bkm else "false",
                      akm="false" if A_M_MAJOR else "true", epi="EpiBiasReluScale" if FUSED else "EpiNone")


if __name__ == "__main__":
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  configs (dynamic shared memory, min blocks/SM): "
          f"{CONFIGS}{'  fused epilogue' if FUSED else ''}{'  a M-major' if A_M_MAJOR else ''}")
    for M, K, N, bkm in SHAPES:
        kernels = {c: cupy_ops.Kernel(source(c, bkm), "mm") for c in CONFIGS}
        a_mem = torch.randn(K, M, device="cuda") if A_M_MAJOR else torch.randn(M, K, device="cuda")
        a = a_mem.t() if A_M_MAJOR else a_mem    # the kernel takes the memory, torch the view
        lda = M if A_M_MAJOR else K
        b = torch.randn(K, N, device="cuda")
        bt = b.t().contiguous()
        bias = torch.randn(N, device="cuda")
        ref_fn = (lambda: torch.relu(torch.addmm(bias, a, b)) * 0.5) if FUSED else (lambda: torch.matmul(a, b))
        ref = ref_fn()
        outs = {c: torch.empty(M, N, device="cuda") for c in CONFIGS}
        fns = {"torch": ref_fn}
        for c, k in kernels.items():
            def run(c=c, k=k):
                k(a_mem, lda, bt if bkm else b, K if bkm else N, outs[c], M, N, K, 3, bias,
                  grid=(cupy_ops.cdiv(N, 128), cupy_ops.cdiv(M, 128)), block=256, shared_mem=SMEM if c[0] == 1 else 0)
            fns[c] = run
        t = time_cuda_interleaved(fns, runs=30, max_seconds=3)
        flops = 2 * M * N * K
        tr = t["torch"].median
        print(f"{M}x{K}x{N} B {'K' if bkm else 'N'}-major: torch {tr:.4f} ms {flops / tr / 1e9:.1f} TF")
        for c in CONFIGS:
            rel = ((outs[c] - ref).abs().max() / ref.abs().max()).item()
            tc = t[c].median
            print(f"   {'dynamic' if c[0] else 'static '} smem, minblocks {c[1]}: {tc:.4f} ms {flops / tc / 1e9:.1f} TF {tr / tc:.3f}x torch  "
                  f"rel diff {rel:.1e}  {t[c]}", flush=True)
