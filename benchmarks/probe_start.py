"""Probe (GPU, Hopper): what the K-splitting kernel's first TMA load waits for (timeline builds of
benchmarks/results/timeline_session17.diff): the table's build; without the tensor maps'
prefetch (WG_NO_PREFETCH); with a timed generic load of the a map's first word at entry
(WG_PARAM_PROBE: its latency in slot 44); the first ring's loads before the CTA's barrier
(WG_EARLY_LOADS). Stamps 40 / 41 / 42: before the first stage's expect_tx, after it, after its
A load.

    python benchmarks/probe_start.py [reps]
"""
import sys

import torch

from cupy_ops.ops import gemm
import probe_timeline as tl
from gemm_cases import operands

tl.reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
tl.EVENTS[:0] = [("param load latency", 44), ("before expect_tx", 40), ("after expect_tx", 41), ("after A load", 42)]
a, b, bias = operands(torch.bfloat16, 1024, 1024, 1024, "N")
c = torch.empty(1024, 1024, device="cuda", dtype=torch.bfloat16)
p = gemm.plan_for(a, b, "EpiNone", "wgmma")
for rnd in range(2):
    for f, d in {"table": {}, "no prefetch": dict(WG_NO_PREFETCH=1), "param probe": dict(WG_PARAM_PROBE=1),
                 "param probe, no prefetch": dict(WG_PARAM_PROBE=1, WG_NO_PREFETCH=1),
                 "early": dict(WG_EARLY_LOADS=1)}.items():
        gemm.KERNELS.update({"gemm_wgmma_ksplit": tl.build("gemm_wgmma_ksplit", tl.KS, WG_TIMELINE=1, **d)})
        tl.timeline(f"{rnd} bf16 1024^3 {f}", p, a, b, c)
    gemm.KERNELS.update(tl.TABLE)
