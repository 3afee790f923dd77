"""Probe (GPU, Hopper): the K-splitting kernel (gemm_wgmma_ksplit) at the small shapes, as
single CTAs and as pairs sharing B (cluster=2), next to torch and the table's plan at a large
shape and the swapped TF32 kernel, timed in interleaved rounds (L2 flushed). Prints one line
per shape, prefixed by LABEL; a tree without the cluster option prints "-" for it.

A / B between two trees (each a checkout of cupy_ops + cuda_src), alternating, same card:

    for i in 1 2; do for t in old new; do PYTHONPATH=$t python benchmarks/probe_ksplit_pair.py $t; done; done

Session 11 (benchmarks/results/probe_ksplit_pair_h100_session11.log, docs/tuning.md): trees
with each warpgroup storing half of the tile, the kernel's end waiting only for the TMA's
reads of its stores, and the K-splitting kernel in clusters (pairs sharing B); only the end's
wait was kept, so on the current tree the "pair" column prints "-".
"""
import sys

import torch

from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm
from gemm_cases import case_name, prepared

label = sys.argv[1] if len(sys.argv) > 1 else "-"
torch.manual_seed(0)
# (dtype, TF32 on, M, K, N, b layout: "N" row-major (K, N), "K" the nn.Linear weight's, epilogue)
SHAPES = [(torch.bfloat16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.float16, False, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 4096, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 256, 1024, 1024, "K", "EpiBiasReluScale"),
          (torch.float32, True, 1024, 1024, 1024, "K", "EpiBiasReluScale"),
          (torch.float32, True, 1024, 1024, 1024, "N", "EpiNone"),
          (torch.bfloat16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.float16, False, 4096, 4096, 4096, "N", "EpiNone"),
          (torch.bfloat16, False, 1024, 8192, 8192, "K", "EpiBiasReluScale"),
          (torch.float32, True, 4096, 4096, 4096, "N", "EpiNone")]
for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES):
    fused = epi != "EpiNone"
    plans = {"table": gemm.plan_for(a, b, epi, "wgmma")}
    if plans["table"].ksplit:
        try:
            plans["pair"] = gemm.plan_for(a, b, epi, "wgmma", ksplit=True, cluster=2)
        except ValueError:   # a tree without pairs of the K-splitting kernel
            pass
    ref = None
    for k, p in plans.items():
        fns[k] = lambda p=p: gemm.run(p, a, b, c, bias, 0.5)
        fns[k]()
        ref = c.clone() if ref is None else ref
        assert torch.equal(c, ref), f"{k} differs from the table's result"
    t = time_cuda_interleaved(fns, runs=200)
    tr = t["torch"].median
    cols = "  ".join(f"{k} {t[k].median * 1e3:7.2f} us {tr / t[k].median:.3f}x" if k in t else f"{k} -"
                     for k in ("table", "pair"))
    name = f"{case_name(dt, tf32, M, K, N, layout)} {'fused' if fused else 'mm'}"
    print(f"{label:<4} {name:<28} torch {tr * 1e3:7.2f} us  {cols}   [{plans['table'].kernel}]", flush=True)
