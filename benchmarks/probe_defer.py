"""Probe (GPU, Hopper; timing only: the builds other than the table's write C wrongly or not at
all): whether the 16-bit epilogue's TMA stores cost where they are issued. gemm_wgmma built with
WG_EPI_DEFER = 1 (each warp's stores of a tile issued under the next tile's second k-tile, after
the conversion, shared-memory writes and fence of both rounds), 2 (the same, no stores: the
bound) against the table's build and torch, interleaved (L2 flushed). Needs the scratch tree of
benchmarks/results/defer_session17.diff.

    python benchmarks/probe_defer.py [rounds]
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan
from gemm_cases import case_name, prepared, ratios, runner

exprs = [e for e in gemm_plan.variants()["gemm_sm90a.cu"] if e.startswith("gemm_wgmma<")]
builds = {"table": {"gemm_wgmma": gemm.KERNELS["gemm_wgmma"]}}
builds.update({name: {"gemm_wgmma": Kernel.builtin("gemm_sm90a.cu", "gemm_wgmma", exprs, arch="sm_90a",
                                                   defines=dict(gemm_plan.SM90A_DEFINES, WG_EPI_DEFER=m))}
               for name, m in (("defer", 1), ("no stores", 2))})
torch.manual_seed(0)
SHAPES = [(torch.bfloat16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.float16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.bfloat16, False, 8192, 8192, 8192, "N", "EpiNone"),
          (torch.bfloat16, False, 2048, 2048, 2048, "N", "EpiNone")]
for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES, int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    p = gemm.plan_for(a, b, epi, "wgmma")
    for name, k in builds.items():
        fns[name] = runner(p, a, b, c, bias, k)
    t = time_cuda_interleaved(fns, runs=100 if M * N * K >= 2 ** 36 else 200)
    gemm.KERNELS.update(builds["table"])
    print(f"{case_name(dt, tf32, M, K, N, layout):26s} {epi[3:7]}", ratios(t, builds), f"[{p.kernel}]", flush=True)
