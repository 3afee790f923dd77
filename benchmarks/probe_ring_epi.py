"""Probe (GPU, Hopper): small outputs as plain 128 x 64 tiles with a 9-stage ring, against the
K-splitting kernel (the table's plan at 1024^3). Session 18's Nsight Compute
(benchmarks/results/ncu_smem_bf16_h100_session18.txt) put cuBLAS's 1024^3 kernel (128 x 64
tiles, no reduction) ~700 cycles of SM-active time shorter than ours, about what the
K-splitting kernel's reduction of the two warpgroups' sums takes (session 17's timeline), and
showed it reading *more* shared memory per k-tile than ours: the reason session 9 gave for the
K split (shared-memory reads per k-tile) does not hold as the bound. Plain 128 x 64 tiles have
no reduction, but 7 stages (their epilogue buffers beside the ring).

Builds: the table's (k-split: "table"; plain 128 x 64 tiles at 7 stages: "p64"), and the scratch
switch WG_RING_EPI (benchmarks/results/ring_epi_session18.diff: apply it first): the plain
kernel with one unit per CTA, its epilogue buffers in the ring and all a block's shared memory
for stages, 9 at BN = 64 ("p64 9st"). Correctness: "p64 9st" bit for bit against "p64" (the same
summation order) on odd shapes; timing in interleaved rounds (L2 flushed) against torch.

    python benchmarks/probe_ring_epi.py [rounds] [sweep]

"sweep": 16-bit shapes where the table takes the K-splitting kernel, K from 512 to 4096, and
no correctness pass (the timing only; for the table's rule).
"""
import dataclasses
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan
from gemm_cases import case_name, operands, prepared, ratios, runner

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
sweep = "sweep" in sys.argv
WG64 = [e for e in gemm_plan.variants()["gemm_sm90a.cu"] if e.startswith("gemm_wgmma<") and ", 64, 1," in e]
TABLE = dict(gemm.KERNELS)
RING = {"gemm_wgmma": Kernel.builtin("gemm_sm90a.cu", "gemm_wgmma", WG64, arch="sm_90a",
                                     defines=dict(gemm_plan.SM90A_DEFINES, WG_RING_EPI=1))}
PLAIN = dict(tile_n=64, ksplit=False, cluster=1, persistent=False, split_k=False)
torch.manual_seed(0)


def ring_plan(p):
    return dataclasses.replace(p, smem=gemm_plan.WG_KSPLIT_SMEM_BYTES)


bad = 0
for dt, tf32 in [] if sweep else [(torch.bfloat16, False), (torch.float16, False), (torch.float32, True)]:
    for M, K, N in [(3, 1000, 40), (129, 4097, 200), (256, 1024, 1024), (70, 2048, 130), (1, 64, 1)]:
        for layout in ("N", "K"):
            if tf32 and layout == "N":
                continue   # TF32 with a row-major b is the swapped kernel
            for epi in ("EpiNone", "EpiBiasReluScale"):
                a, b, bias = operands(dt, M, K, N, layout, tf32)
                try:
                    p = gemm.plan_for(a, b, epi, "wgmma", **PLAIN)
                except ValueError as e:
                    print("skip", case_name(dt, tf32, M, K, N, layout), e)
                    continue
                c = torch.empty(M, N, device="cuda", dtype=dt)
                gemm.KERNELS.update(TABLE)
                gemm.run(p, a, b, c, bias, 0.5)
                ref = c.clone()
                gemm.KERNELS.update(RING)
                c.fill_(7)
                gemm.run(ring_plan(p), a, b, c, bias, 0.5)
                gemm.KERNELS.update(TABLE)
                if not torch.equal(c, ref):
                    bad += 1
                    print("DIFF", case_name(dt, tf32, M, K, N, layout), epi, p)
print(f"correctness: {bad} differing cases", flush=True)

SHAPES = [(torch.bfloat16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.float16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 4096, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 256, 1024, 1024, "K", "EpiBiasReluScale"),
          (torch.float32, True, 1024, 1024, 1024, "K", "EpiBiasReluScale"),
          (torch.bfloat16, False, 1024, 1024, 1024, "K", "EpiBiasReluScale")]
if sweep:
    SHAPES = [(dt, False, M, K, N, layout, epi)
              for dt, layout, epi in [(torch.bfloat16, "N", "EpiNone"), (torch.bfloat16, "K", "EpiBiasReluScale"),
                                      (torch.float16, "N", "EpiNone")]
              for M, N in [(1024, 1024), (512, 1024), (256, 1024), (128, 2048), (64, 4096), (1024, 512)]
              for K in (512, 1024, 1536, 2048, 4096)
              if dt == torch.bfloat16 or (M, N) == (1024, 1024)]
for rnd in range(rounds):
    for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES):
        p = gemm.plan_for(a, b, epi, "wgmma")
        p64 = gemm.plan_for(a, b, epi, "wgmma", **PLAIN)
        if rnd == 0 and not sweep:
            print(p, p64, sep="\n")
        if not p.ksplit:
            print("not k-split:", case_name(dt, tf32, M, K, N, layout), p)
            continue
        fns["table"] = runner(p, a, b, c, bias, TABLE)
        fns["p64"] = runner(p64, a, b, c, bias, TABLE)
        fns["p64 9st"] = runner(ring_plan(p64), a, b, c, bias, RING)
        t = time_cuda_interleaved(fns, runs=300)
        gemm.KERNELS.update(TABLE)
        print(f"{rnd} {case_name(dt, tf32, M, K, N, layout):26s} {epi[3:7]}", ratios(t, ("table", "p64", "p64 9st")),
              flush=True)
