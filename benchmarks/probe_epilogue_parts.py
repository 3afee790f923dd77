"""Probe (GPU, Hopper; timing only, the builds other than "full" do not write C): where the 16-bit
kernel's TMA-store epilogue costs, gemm_wgmma built with WG_EPI_PROBE = 0 (full), 1 (no
epilogue), 2 (convert + st.shared, no TMA store), 4 (convert only), 5 (convert + st.shared +
the proxy fence), 6 / 7 (full, the stores with an L2 evict_first / evict_last policy), and
"threads" (the table's plan with tma_store=False: the threads' 16-byte stores from the same
buffers), interleaved against torch. Needs the scratch tree of benchmarks/results/
epilogue_parts_session16.diff (the WG_EPI_PROBE switches)."""
import sys
import torch
from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan
from gemm_cases import prepared

names = {0: "full", 1: "none", 2: "cvt+sts", 4: "cvt", 5: "fence", 6: "evfirst", 7: "evlast"}
exprs = [e for e in gemm_plan.variants()["gemm_sm90a.cu"] if e.startswith("gemm_wgmma<")]
kern = {m: Kernel.builtin("gemm_sm90a.cu", "gemm_wgmma", exprs, arch="sm_90a",
                          defines=dict(gemm_plan.SM90A_DEFINES, WG_EPI_PROBE=m)) for m in names}
torch.manual_seed(0)
SHAPES = [(torch.bfloat16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.float16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.bfloat16, False, 8192, 8192, 8192, "N", "EpiNone")]
for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES, int(sys.argv[1]) if len(sys.argv) > 1 else 1):
    p = gemm.plan_for(a, b, epi, "wgmma")
    def mk(m):
        def f():
            gemm.KERNELS["gemm_wgmma"] = kern[m]
            gemm.run(p, a, b, c, bias, 0.5)
        return f
    for m in names:
        fns[names[m]] = mk(m)
    pt = gemm.plan_for(a, b, epi, "wgmma", tma_store=False)
    def staged():
        gemm.KERNELS["gemm_wgmma"] = kern[0]
        gemm.run(pt, a, b, c, bias, 0.5)
    fns["threads"] = staged
    t = time_cuda_interleaved(fns, runs=100)
    tr = t["torch"].median
    print(f"{str(dt)[6:]:8s} {M}x{K}x{N} {epi:16s} torch {tr*1e3:7.1f} us  " +
          "  ".join(f"{m} {t[m].median*1e3:7.1f} {tr/t[m].median:5.3f}x" for m in list(names.values()) + ["threads"]), flush=True)
