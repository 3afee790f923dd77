"""Probe (GPU, Hopper): the K-splitting kernel's end (scratch switches of
benchmarks/results/timeline_session17.diff), against the table's build and torch:

- "halves" (WG_KSPLIT_HALVES): each consumer warpgroup hands the other its partial sums of the
  other's half of the columns, adds the other's of its own, and stores its 64 x 64 half;
- "last" (WG_KSPLIT_LAST): warpgroup 0 takes all k-steps of the last k-tile while warpgroup 1,
  done one k-tile earlier, hands over its sums (once warpgroup 0 has released the stages they
  go to); one barrier instead of two;
- "... thr": the same plan with the threads' stores (tma_store=False: no TMA, no wait for its
  reads before the CTA ends).

Correctness (halves: bit for bit against the table's build; last: sums in another order, so
against torch's fp32 result in both's error terms) on odd shapes (both epilogues, TMA and
thread stores), timing in interleaved rounds (L2 flushed), then probe_timeline.py's timeline.

    python benchmarks/probe_ksplit_tail.py [rounds] [--all]
"""
import dataclasses
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm
from gemm_cases import SMALL_SHAPES, case_name, odd_cases, operands, prepared, ratios, runner
from probe_timeline import KS, TABLE, build, timeline

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
thr = "--all" in sys.argv   # also "halves" and the threads' stores
HALVES = {"gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS, WG_KSPLIT_HALVES=1)}
LAST = {"gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS, WG_KSPLIT_LAST=1)}
torch.manual_seed(0)

# correctness: odd shapes through the K-splitting kernel (forced), both epilogues
bad = 0
for label, epi, a, b, bias, c, p in odd_cases(
        [(torch.bfloat16, False), (torch.float16, False), (torch.float32, True)],
        [(1, 64, 1), (3, 127, 40), (129, 129, 200), (127, 4097, 129), (64, 64, 64), (200, 1000, 72), (256, 1024, 1024),
         (65, 33, 136), (64, 640, 128), (70, 704, 130), (128, 576, 256), (64, 1152, 64), (64, 65, 128)], ksplit=True):
    dt = a.dtype
    gemm.KERNELS.update(TABLE)
    gemm.run(p, a, b, c, bias, 0.5)
    ref = c.clone()
    gemm.KERNELS.update(HALVES)
    c.fill_(7)
    gemm.run(p, a, b, c, bias, 0.5)
    ok_h = torch.equal(c, ref)
    gemm.KERNELS.update(LAST)
    c.fill_(7)
    gemm.run(p, a, b, c, bias, 0.5)
    gemm.KERNELS.update(TABLE)
    # "last": against the fp64 product, no worse than twice the table's error + 1 ulp
    x = a.double() @ b.double()
    if epi != "EpiNone":
        x = torch.relu(x.to(dt).double() + bias.double()) * 0.5
    e_t = (ref.double() - x).abs().max().item()
    e_l = (c.double() - x).abs().max().item()
    eps = torch.finfo(dt).eps * max(x.abs().max().item(), 1e-30)
    ok_l = e_l <= 2 * e_t + eps and not torch.isnan(c).any()
    ok = ok_h and ok_l
    bad += not ok
    if not ok:
        print("DIFF", label, epi, f"halves equal {ok_h}, last error {e_l:.3g} against {e_t:.3g}", p)
print(f"correctness: {bad} differing cases", flush=True)

SHAPES = SMALL_SHAPES
for rnd in range(rounds):
    for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES):
        p = gemm.plan_for(a, b, epi, "wgmma")
        fns["table"] = runner(p, a, b, c, bias, TABLE)
        fns["last"] = runner(p, a, b, c, bias, LAST)
        if thr:
            fns["halves"] = runner(p, a, b, c, bias, HALVES)
            pt = dataclasses.replace(p, tma_store=False)
            fns["table thr"] = runner(pt, a, b, c, bias, TABLE)
            fns["last thr"] = runner(pt, a, b, c, bias, LAST)
        t = time_cuda_interleaved(fns, runs=300)
        gemm.KERNELS.update(TABLE)
        print(f"{rnd} {case_name(dt, tf32, M, K, N, layout):26s} {epi[3:7]}",
              ratios(t, ("table", "halves", "last", "table thr", "last thr")), f"[{p.kernel}]", flush=True)

a, b, bias = operands(torch.bfloat16, 1024, 1024, 1024, "N")
c = torch.empty(1024, 1024, device="cuda", dtype=torch.bfloat16)
p = gemm.plan_for(a, b, "EpiNone", "wgmma")
for f, d in {"table": dict(WG_TIMELINE=1), "last": dict(WG_TIMELINE=1, WG_KSPLIT_LAST=1)}.items():
    gemm.KERNELS.update({"gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS, **d)})
    timeline(f"bf16 1024^3 {f}", p, a, b, c)
gemm.KERNELS.update(TABLE)
