"""Probe (GPU, Hopper): the K-splitting kernel (gemm_wgmma_ksplit: 64 x 128 tiles, the table's
plan at 1024^3) built with other shared-memory budgets (ring stages), against the table's build
and torch, timed in interleaved rounds (L2 flushed), bit for bit against the table's result.
Session 16's first run (main 810242f: the budget the define WG_SMEM_BYTES, epilogue buffers of
32 KB after the ring, 7 stages in the table's build) and second (the kernel's own budget
WG_KSPLIT_SMEM_BYTES, its epilogue staged in the ring: 9 stages in 227 KB) set both defines.

    python benchmarks/probe_ksplit_smem.py [rounds] [stages,stages,...]
"""
import dataclasses
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan
from gemm_cases import case_name, prepared

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
STAGE = 64 * 128 + 128 * 128 + 16   # A (64 rows) + B (128 columns) x 128 bytes, 2 mbarriers
exprs = [e for e in gemm_plan.variants()["gemm_sm90a.cu"] if e.startswith("gemm_wgmma_ksplit<")]
builds = {}
EPI = 0 if hasattr(gemm_plan, "WG_KSPLIT_SMEM_BYTES") else gemm_plan.WG_EPI_BYTES   # buffers in the ring or not
for stages in (sys.argv[2] if len(sys.argv) > 2 else "3,4,6,8").split(","):
    smem = int(stages) * STAGE + 1024 + EPI
    builds[f"s{stages}"] = (smem, Kernel.builtin("gemm_sm90a.cu", "gemm_wgmma_ksplit", exprs, arch="sm_90a",
                                                 defines=dict(gemm_plan.SM90A_DEFINES, WG_SMEM_BYTES=smem,
                                                              WG_KSPLIT_SMEM_BYTES=smem)))
table_kernel = gemm.KERNELS["gemm_wgmma_ksplit"]
torch.manual_seed(0)
SHAPES = [(torch.bfloat16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.float16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 4096, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 256, 1024, 1024, "K", "EpiBiasReluScale"),
          (torch.float32, True, 1024, 1024, 1024, "K", "EpiBiasReluScale")]
for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES, rounds):
    p = gemm.plan_for(a, b, epi, "wgmma")
    assert p.ksplit, p

    def run(q, k):
        def f():
            gemm.KERNELS["gemm_wgmma_ksplit"] = k
            gemm.run(q, a, b, c, bias, 0.5)
        return f
    fns["table"] = run(p, table_kernel)
    fns["table"]()
    ref = c.clone()
    for name, (smem, k) in builds.items():
        fns[name] = run(dataclasses.replace(p, smem=smem), k)
        fns[name]()
        assert torch.equal(c, ref), name
    t = time_cuda_interleaved(fns, runs=300)
    tr = t["torch"].median
    name = case_name(dt, tf32, M, K, N, layout)
    print(f"{name:24s} torch {tr * 1e3:6.2f} us  " + "  ".join(
        f"{k} {t[k].median * 1e3:6.2f} {tr / t[k].median:5.3f}x" for k in ["table"] + list(builds)), flush=True)
