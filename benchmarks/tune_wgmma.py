"""Experiment (GPU, Hopper): the Hopper GEMM's two block-tile widths (128 x 128, 128 x 256)
against torch at several shapes, bf16 and TF32, to set tables.WGMMA_WIDE_MIN_WAVES (the
number of waves of 128 x 256 blocks below which 128 x 128 blocks are used) and
WG_SPLIT_MAX_WAVES. The bn columns force one width without split-K through the plan's
overrides (``cupy_ops.ops.gemm.plan_for(..., tile_n=, split_k=False)``); "auto" is the table.

    python benchmarks/tune_wgmma.py | tee tune_wgmma.log        (docs/gemm.md#tile-width)
"""

import torch
import torch.nn.functional as F

from cupy_ops import cdiv
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import gemm

SHAPES = [
    (256, 1024, 1024),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (1024, 8192, 8192),
    (2048, 8192, 8192),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
]
sms = gemm.device_info(0).sm_count
print(describe(environment()))
print(
    f"{'dtype':<5} {'M x K x N':<16} {'waves@256':>9} {'torch mm':>9} {'bn=128':>14} {'bn=256':>14} {'auto':>14} "
    f"{'torch lin':>9} {'bn=128':>14} {'bn=256':>14} {'auto':>14}  (TFLOP/s, ratio to torch; auto: the "
    f"shape table, with split-K)"
)
for dname, dtype in (("bf16", torch.bfloat16), ("tf32", torch.float32)):
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    for M, K, N in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        w = b.t().contiguous()
        bias = torch.randn(N, device="cuda", dtype=dtype)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        fl = 2 * M * N * K / 1e9
        t_mm = time_cuda(lambda: torch.matmul(a, b), runs=30).median
        t_lin = time_cuda(lambda: torch.relu(F.linear(a, w, bias)) / 2, runs=30).median
        cells = []
        for epi, t_ref, bb in (("EpiNone", t_mm, b), ("EpiBiasReluScale", t_lin, w.t())):
            row = [f"{fl / t_ref:>9.0f}"]
            plans = [gemm.plan_for(a, bb, epi, "wgmma", tile_n=bn, split_k=False) for bn in (128, 256)]
            plans.append(gemm.plan_for(a, bb, epi, "wgmma"))
            for p in plans:
                t = time_cuda(
                    lambda p=p: gemm.run(p, a, bb, c, bias if epi != "EpiNone" else None, 0.5), runs=30
                ).median
                row.append(f"{fl / t:>7.0f} ({t_ref / t:.2f}x)")
            cells += row
        waves = cdiv(M, 128) * cdiv(N, 256) / sms
        print(f"{dname:<5} {f'{M}x{K}x{N}':<16} {waves:>9.2f} " + " ".join(cells), flush=True)
torch.backends.cuda.matmul.allow_tf32 = False
