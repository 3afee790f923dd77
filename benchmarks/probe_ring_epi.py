"""Probe (GPU, Hopper): small outputs as plain 128 x 64 tiles with a 9-stage ring, against the
K-splitting kernel (the table's plan at 1024^3). Session 18's Nsight Compute
(benchmarks/results/ncu_smem_bf16_h100_session18.txt) put cuBLAS's 1024^3 kernel (128 x 64
tiles, no reduction) ~700 cycles of SM-active time shorter than ours, about what the
K-splitting kernel's reduction of the two warpgroups' sums takes (session 17's timeline), and
showed it reading *more* shared memory per k-tile than ours: the reason session 9 gave for the
K split (shared-memory reads per k-tile) does not hold as the bound. Plain 128 x 64 tiles have
no reduction, but 7 stages (their epilogue buffers beside the ring).

Plans: the K split ("table" in session 18's logs, before ba22bcd; forced with ksplit=True now),
plain 128 x 64 tiles at 7 stages ("p64"), and the plain kernel with one unit per CTA, its
epilogue buffers in the ring and all a block's shared memory for stages, 9 at BN = 64 ("p64
9st"): in the logs a scratch switch (benchmarks/results/ring_epi_session18.diff, WG_RING_EPI),
landed as gemm_wgmma_single (single=True), which this script now runs. Correctness: "p64 9st"
bit for bit against "p64" (the same summation order) on odd shapes (16-bit; TF32 ran in the
logs, the landed kernel is 16-bit only); timing in interleaved rounds (L2 flushed) against torch.

    python benchmarks/probe_ring_epi.py [rounds] [sweep]

"sweep": 16-bit shapes where the table takes the K-splitting kernel, K from 512 to 4096, and
no correctness pass (the timing only; for the table's rule).
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm
from gemm_cases import SMALL_SHAPES, case_name, odd_cases, prepared, ratios, runner

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
sweep = "sweep" in sys.argv
TABLE = dict(gemm.KERNELS)
PLAIN = dict(tile_n=64, ksplit=False, cluster=1, persistent=False, split_k=False)
torch.manual_seed(0)

bad = 0
for label, epi, a, b, bias, c, p in odd_cases([] if sweep else [(torch.bfloat16, False), (torch.float16, False)],
                                              [(3, 1000, 40), (129, 4097, 200), (256, 1024, 1024), (70, 2048, 130),
                                               (1, 64, 1)], **PLAIN):
    gemm.run(p, a, b, c, bias, 0.5)
    ref = c.clone()
    c.fill_(7)
    gemm.run(gemm.plan_for(a, b, epi, "wgmma", single=True), a, b, c, bias, 0.5)
    if not torch.equal(c, ref):
        bad += 1
        print("DIFF", label, epi, p)
print(f"correctness: {bad} differing cases", flush=True)

SHAPES = SMALL_SHAPES
if sweep:
    SHAPES = [(dt, False, M, K, N, layout, epi)
              for dt, layout, epi in [(torch.bfloat16, "N", "EpiNone"), (torch.bfloat16, "K", "EpiBiasReluScale"),
                                      (torch.float16, "N", "EpiNone")]
              for M, N in [(1024, 1024), (512, 1024), (256, 1024), (128, 2048), (64, 4096), (1024, 512)]
              for K in (512, 1024, 1536, 2048, 4096)
              if dt == torch.bfloat16 or (M, N) == (1024, 1024)]
for rnd in range(rounds):
    for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES):
        p = gemm.plan_for(a, b, epi, "wgmma", ksplit=True)
        p64 = gemm.plan_for(a, b, epi, "wgmma", **PLAIN)
        if rnd == 0 and not sweep:
            print(p, p64, sep="\n")
        if sweep and not gemm.plan_for(a, b, epi, "wgmma", single=False).ksplit:
            print("not k-split:", case_name(dt, tf32, M, K, N, layout))
            continue
        fns["table"] = runner(p, a, b, c, bias, TABLE)
        fns["p64"] = runner(p64, a, b, c, bias, TABLE)
        if not tf32:
            fns["p64 9st"] = runner(gemm.plan_for(a, b, epi, "wgmma", single=True), a, b, c, bias, TABLE)
        t = time_cuda_interleaved(fns, runs=300)
        print(f"{rnd} {case_name(dt, tf32, M, K, N, layout):26s} {epi[3:7]}", ratios(t, ("table", "p64", "p64 9st")),
              flush=True)
