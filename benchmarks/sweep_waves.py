"""Experiment (GPU, Hopper): the Hopper kernel's wide grids at shapes on and off whole waves.

For outputs of at least a wave of 128 x 256 tiles, times the plan's own choice ("table") and
each candidate of tables.WG_WIDE_SPEEDS: 128 x 256 tiles in persistent 2-CTA clusters,
128 x 256 tiles one CTA each (the hardware schedules them), 128 x 128 tiles in persistent
clusters, and 128 x 128 tiles one CTA each; against torch in the same process. The last
columns give the waves of the first two (units over the clusters / tiles over the SMs): how
WG_WIDE_SPEEDS was set (docs/gemm.md#whole-waves).

    python benchmarks/sweep_waves.py | tee sweep_waves.log
"""

import math

import torch

from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import gemm

CONF = {
    "table": {},
    "cl2 p 256": dict(cluster=2, persistent=True, tile_n=256),
    "cl1 256": dict(cluster=1, persistent=False, tile_n=256),
    "cl2 p 128": dict(cluster=2, persistent=True, tile_n=128),
    "cl1 128": dict(cluster=1, persistent=False, tile_n=128),
}
bf16, fp32 = torch.bfloat16, torch.float32
CASES = [
    (bf16, 4096, 4096, 4096),
    (bf16, 4224, 4096, 4096),
    (bf16, 4352, 4096, 4096),
    (bf16, 3968, 4096, 4096),
    (bf16, 4096, 4096, 4352),
    (bf16, 4608, 4096, 4608),
    (bf16, 5120, 4096, 5120),
    (bf16, 3072, 4096, 3072),
    (bf16, 2560, 4096, 4096),
    (bf16, 6144, 4096, 6144),
    (bf16, 2304, 4096, 4096),
    (bf16, 8192, 2048, 8192),
    (fp32, 4224, 4096, 4096),
    (fp32, 4096, 4096, 4096),
    (fp32, 5120, 4096, 5120),
]

print(describe(environment()))
print(
    f"{'case (M x K x N)':<26} {'torch ms':>8} "
    + " ".join(f"{k:>20}" for k in CONF)
    + "   waves (cl2-256 units / 66, cl1-256 tiles / 132); ms and ratio to torch"
)
for dt, M, K, N in CASES:
    torch.backends.cuda.matmul.allow_tf32 = dt == fp32
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    t_ref = time_cuda(lambda: torch.matmul(a, b), runs=30).median
    cells, plans = [], []
    for kw in CONF.values():
        p = gemm.plan_for(a, b, "EpiNone", "wgmma", **kw)
        t = time_cuda(lambda: gemm.run(p, a, b, c), runs=30).median
        cells.append(f"{t:.4f} {t_ref / t:.3f}x")
        plans.append(p)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    u2, t1 = math.ceil(M / 256) * math.ceil(N / 256), math.ceil(M / 128) * math.ceil(N / 256)
    print(
        f"{'tf32' if dt == fp32 else 'bf16'} {M}x{K}x{N:<16} {t_ref:8.4f} "
        + " ".join(f"{x:>20}" for x in cells)
        + f"   {u2 / (sms // 2):.2f} {t1 / sms:.2f}  table: tile {plans[0].tile[1]}, cluster {plans[0].cluster}",
        flush=True,
    )
torch.backends.cuda.matmul.allow_tf32 = False
