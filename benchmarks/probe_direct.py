"""Probe (GPU, Hopper): two changes to the 16-bit Hopper kernels, as builds of the scratch switches
in benchmarks/results/timeline_session17.diff, against the table's build and torch:

- "direct" (WG_DIRECT_STORE): the 16-bit epilogue from registers straight to global memory,
  16-byte stores of whole 32-byte row pieces (a 4 x 4 transpose of each quad's words by
  shuffles), instead of shared memory + the TMA;
- "early" (WG_EARLY_LOADS): single-CTA launches issue their first ring's loads right after
  the mbarrier inits, before the CTA's barrier and setmaxnreg;
- "both".

Timed in interleaved rounds (L2 flushed), each build bit for bit against the table's result;
then timelines (probe_timeline.py's) of the table's and the "both" build.

    python benchmarks/probe_direct.py [rounds]
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm
from gemm_cases import case_name, operands, prepared, ratios, runner
from probe_timeline import KS, TABLE, WG, build, timeline

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
FLAVOURS = {"direct": dict(WG_DIRECT_STORE=1), "early": dict(WG_EARLY_LOADS=1),
            "both": dict(WG_DIRECT_STORE=1, WG_EARLY_LOADS=1)}
BUILDS = {f: {"gemm_wgmma": build("gemm_wgmma", WG, **d), "gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS, **d)}
          for f, d in FLAVOURS.items()}
torch.manual_seed(0)
SHAPES = [(torch.bfloat16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.float16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 4096, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 256, 1024, 1024, "K", "EpiBiasReluScale"),
          (torch.float32, True, 1024, 1024, 1024, "K", "EpiBiasReluScale"),
          (torch.bfloat16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.float16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.bfloat16, False, 8192, 8192, 8192, "N", "EpiNone"),
          (torch.bfloat16, False, 2048, 2048, 2048, "N", "EpiNone")]
for rnd in range(rounds):
    for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES):
        p = gemm.plan_for(a, b, epi, "wgmma")
        fns["table"] = runner(p, a, b, c, bias, TABLE)
        fns["table"]()
        ref = c.clone()
        for f, k in BUILDS.items():
            fns[f] = runner(p, a, b, c, bias, k)
            c.zero_()
            fns[f]()
            assert torch.equal(c, ref), (f, case_name(dt, tf32, M, K, N, layout))
        t = time_cuda_interleaved(fns, runs=300 if M * N * K < 2 ** 33 else 100)
        gemm.KERNELS.update(TABLE)
        print(f"{rnd} {case_name(dt, tf32, M, K, N, layout):26s} {epi[3:7]}", ratios(t, ["table"] + list(BUILDS)),
              f"[{p.kernel}]", flush=True)

TLB = {"table": dict(WG_TIMELINE=1), "early": dict(WG_TIMELINE=1, WG_EARLY_LOADS=1),
       "both": dict(WG_TIMELINE=1, WG_EARLY_LOADS=1, WG_DIRECT_STORE=1)}
for dt, M, K, N in [(torch.bfloat16, 1024, 1024, 1024), (torch.bfloat16, 4096, 4096, 4096)]:
    a, b, bias = operands(dt, M, K, N, "N")
    c = torch.empty(M, N, device="cuda", dtype=dt)
    p = gemm.plan_for(a, b, "EpiNone", "wgmma")
    for f, d in TLB.items():
        if p.persistent and f == "early":
            continue
        gemm.KERNELS.update({"gemm_wgmma": build("gemm_wgmma", WG, **d), "gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS, **d)})
        timeline(f"{case_name(dt, False, M, K, N, 'N')} {f}", p, a, b, c)
    gemm.KERNELS.update(TABLE)
