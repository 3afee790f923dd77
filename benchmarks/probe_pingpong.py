"""Probe (GPU, Hopper): the persistent 16-bit / TF32 kernel with its two consumer warpgroups on
alternate 64-row tiles (gemm_wgmma_pp: one's epilogue under the other's main loop, "ping-pong")
against the table's plan (both warpgroups on one 128-row tile) and torch, timed in interleaved
rounds (L2 flushed), after checking it bit for bit against the table's plan on odd shapes. Needs
the kernel of benchmarks/results/pingpong_session16.diff (gemm_wgmma_pp; dropped: 0.79-0.90x
torch against the table's 0.98-1.10x, probe_pingpong_h100_session16.log).

    python benchmarks/probe_pingpong.py [rounds]
"""
import dataclasses
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan
from gemm_cases import operands, prepared

# the probe's kernel, not (yet) among the plan's variants
gemm.KERNELS["gemm_wgmma_pp"] = Kernel.builtin(
    "gemm_sm90a.cu", "gemm_wgmma_pp",
    [e.replace("gemm_wgmma<", "gemm_wgmma_pp<") for e in gemm_plan.variants()["gemm_sm90a.cu"]
     if e.startswith("gemm_wgmma<")], arch="sm_90a", defines=gemm_plan.SM90A_DEFINES)

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.manual_seed(0)


def pp(p):
    return dataclasses.replace(p, kernel=p.kernel.replace("gemm_wgmma<", "gemm_wgmma_pp<"), tile=(64, p.tile[1]))


# bit for bit against the table's kernel (forced persistent pairs of 256-wide tiles)
checks = 0
for dt, M, K, N, layout, epi, over in [
        (torch.bfloat16, 4097, 136, 520, "N", "EpiNone", dict(tile_n=256, cluster=2, persistent=True)),
        (torch.float16, 129, 64, 264, "N", "EpiNone", dict(tile_n=256, cluster=2, persistent=True)),
        (torch.bfloat16, 1000, 4104, 1000, "K", "EpiBiasReluScale", dict(tile_n=256, cluster=2, persistent=True)),
        (torch.bfloat16, 3000, 200, 3000, "N", "EpiNone", dict(tile_n=256, cluster=1, persistent=True)),
        (torch.float32, 777, 520, 1000, "K", "EpiBiasReluScale", dict(tile_n=256, cluster=2, persistent=True)),
        (torch.bfloat16, 8192, 1024, 8192, "N", "EpiNone", {}),
        (torch.bfloat16, 256, 8, 512, "N", "EpiNone", dict(tile_n=256, cluster=2, persistent=True))]:
    a, b, bias = operands(dt, M, K, N, layout, tf32=dt == torch.float32)
    p = gemm.plan_for(a, b, epi, "wgmma", **over)
    assert not p.swap and not p.ksplit and p.slices == 1, p
    c0 = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    c1 = c0.clone()
    gemm.run(p, a, b, c0, bias, 0.5)
    gemm.run(pp(p), a, b, c1, bias, 0.5)
    assert torch.equal(c0, c1), f"pp differs at {M}x{K}x{N} {dt} {epi}: {(c0 - c1).abs().max()}"
    checks += 1
torch.cuda.synchronize()
print(f"pp bit-equal to the table's plan on {checks} shapes", flush=True)

SHAPES = [(torch.bfloat16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.float16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.float16, False, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.float32, True, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.bfloat16, False, 8192, 8192, 8192, "N", "EpiNone"),
          (torch.bfloat16, False, 2048, 2048, 2048, "N", "EpiNone"),
          (torch.bfloat16, False, 6144, 6144, 6144, "N", "EpiNone"),
          (torch.bfloat16, False, 4096, 4096, 4096, "K", "EpiBiasReluScale")]
for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES, rounds):
    p = gemm.plan_for(a, b, epi, "wgmma")
    plans = {"table": p}
    if not p.swap and not p.ksplit and p.slices == 1 and p.persistent:
        plans["pp"] = pp(p)
        plans["pp_g16"] = dataclasses.replace(pp(p), group=16)
    for k, q in plans.items():
        fns[k] = lambda q=q: gemm.run(q, a, b, c, bias, 0.5)
    t = time_cuda_interleaved(fns, runs=100 if M * N * K >= 2 ** 38 else 200)
    tr = t["torch"].median
    cells = "  ".join(f"{k} {t[k].median * 1e3:8.1f} us {tr / t[k].median:5.3f}x" for k in plans)
    print(f"{str(dt)[6:]:8s} {M}x{K}x{N} {layout} {epi:16s} torch {tr * 1e3:8.1f} us  {cells}  [{p.kernel}]",
          flush=True)
