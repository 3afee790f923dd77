"""Probe (GPU, Hopper): two changes to how the K-splitting kernel's ring starts (scratch
switches of benchmarks/results/ksplit_start_session18.diff: apply it first; session 18), each
against the table's build and torch:

- "prefetch" (WG_L2_PREFETCH): once the producer has issued the ring's first STAGES loads it
  hints the unit's remaining k-tiles into L2 (`cp.async.bulk.prefetch.tensor`): "pf own" every
  box this CTA will load, "pf split" each box by one of the CTAs that share it. Premise: a
  k-tile past the ring's first fill is a DRAM miss when its first CTA asks for it (the 256 MB
  flush before each run); brought in early, the refills would hit in L2.
- "stagger" (WG_STAGGER = P): the producer issues k-tiles 0 .. P - 1, waits until k-tile 0's
  data has landed, then issues the rest of the ring. Premise: the first data (~2.1 us after
  the CTA starts, session 17) waits behind the DRAM reads of all 9 stages of all 128 CTAs; with
  fewer requests ahead of it, k-tile 0 would arrive, and the per-SM streaming start, sooner.

Correctness: bit for bit against the table's build (neither changes a value) on odd shapes;
timing: torch, the table's plan and the set's builds in interleaved rounds (L2 flushed).

    python benchmarks/probe_ksplit_start.py prefetch|stagger [rounds]
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan
from gemm_cases import SMALL_SHAPES, case_name, odd_cases, prepared, ratios, runner

KS = [e for e in gemm_plan.variants()["gemm_sm90a.cu"] if e.startswith("gemm_wgmma_ksplit<")]
TABLE = dict(gemm.KERNELS)


def build(name, exprs, **extra):
    return Kernel.builtin("gemm_sm90a.cu", name, exprs, arch="sm_90a", defines=dict(gemm_plan.SM90A_DEFINES, **extra))


SETS = {"prefetch": {"pf own": dict(WG_L2_PREFETCH=1), "pf split": dict(WG_L2_PREFETCH=2)},
        "stagger": {"wait@1": dict(WG_STAGGER=1), "wait@2": dict(WG_STAGGER=2), "wait@4": dict(WG_STAGGER=4)}}
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
BUILDS = {name: {"gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS, **d)} for name, d in SETS[sys.argv[1]].items()}
torch.manual_seed(0)

bad = 0
for label, epi, a, b, bias, c, p in odd_cases([(torch.bfloat16, False), (torch.float32, True)],
                                              [(3, 1000, 40), (129, 4097, 200), (256, 1024, 1024), (70, 2048, 130)],
                                              ksplit=True):
    gemm.KERNELS.update(TABLE)
    gemm.run(p, a, b, c, bias, 0.5)
    ref = c.clone()
    for name, kern in BUILDS.items():
        gemm.KERNELS.update(kern)
        c.fill_(7)
        gemm.run(p, a, b, c, bias, 0.5)
        if not torch.equal(c, ref):
            bad += 1
            print("DIFF", name, label, epi, p)
    gemm.KERNELS.update(TABLE)
print(f"correctness: {bad} differing cases", flush=True)

SHAPES = SMALL_SHAPES
for rnd in range(rounds):
    for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES):
        p = gemm.plan_for(a, b, epi, "wgmma")
        fns["table"] = runner(p, a, b, c, bias, TABLE)
        for name, kern in BUILDS.items():
            fns[name] = runner(p, a, b, c, bias, kern)
        t = time_cuda_interleaved(fns, runs=300)
        gemm.KERNELS.update(TABLE)
        print(f"{rnd} {case_name(dt, tf32, M, K, N, layout):26s} {epi[3:7]}",
              ratios(t, ("table", *BUILDS)), f"[{p.kernel}]", flush=True)
