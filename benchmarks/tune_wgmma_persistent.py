"""Experiment (GPU, Hopper): the Hopper kernel's grid (persistent or one cluster per tile),
cluster size (1: each CTA loads its whole B tile; 2: a CTA pair shares it by TMA multicast),
tile-walk group height, tile width and epilogue stores (the threads' or the TMA's), against
torch in the same process, with each result's error against an fp32 reference (a broken
variant shows as a large error, not only as a time): how tables.WG_CLUSTER_MIN_WAVES,
WG_GROUP and WG_NARROW_MAX_WAVES and the TMA stores were set (docs/gemm.md#clusters).

    python benchmarks/tune_wgmma_persistent.py [c,g,p[,n[,s]] ...] [--small] | tee tune.log

Each field is an int or "-" for the plan's own table: c cluster, g group, p persistent (0/1),
n tile width, s TMA stores (0/1).
"""

import sys

import torch
import torch.nn.functional as F

from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import gemm

# (cluster, group, persistent, tile_n, tma_store; None: the plan's table); "c,g,p[,n[,s]]"
# arguments replace them, and "--small" runs the small shapes only, also timed inside a CUDA
# graph (no host overhead).
ARGS = [x for x in sys.argv[1:] if not x.startswith("--")]
SMALL = "--small" in sys.argv
CONFIGS = [(None,) * 4 + (False,), (None,) * 5]
if ARGS:
    CONFIGS = [
        tuple(None if f == "-" else int(f) for f in c.split(",")) + (None,) * (5 - len(c.split(","))) for c in ARGS
    ]
NAMES = ["".join(f"{k}{'-' if v is None else v}" for k, v in zip(("c", " g", " p", " n", " s"), c)) for c in CONFIGS]
CASES = [
    ("bf16", "mm", 4096, 4096, 4096),
    ("fp16", "mm", 4096, 4096, 4096),
    ("tf32", "mm", 4096, 4096, 4096),
    ("bf16", "mm", 8192, 8192, 8192),
    ("bf16", "mm", 1024, 1024, 1024),
    ("tf32", "mm", 1024, 1024, 1024),
    ("bf16", "lin", 1024, 8192, 8192),
    ("tf32", "lin", 1024, 8192, 8192),
    ("bf16", "lin", 256, 1024, 1024),
]
if SMALL:
    CASES = [
        (d, op, M, K, N)
        for d in ("bf16", "tf32")
        for op, M, K, N in (
            ("mm", 1024, 1024, 1024),
            ("mm", 2048, 1024, 1024),
            ("mm", 1024, 4096, 1024),
            ("lin", 256, 1024, 1024),
            ("mm", 2048, 2048, 2048),
        )
    ]


def graph_timed(fn):
    """fn captured in a CUDA graph: the replay's time has no Python in it."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return time_cuda(g.replay, runs=30).median


DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}

print(describe(environment()))
print(
    f"{'case':<26} {'torch ms':>9} "
    + " ".join(f"{n:>{38 if SMALL else 22}}" for n in NAMES)
    + "   (ms, ratio to torch, max|err|/max|ref| vs fp32 ref; torch's own error in [])"
)
for dname, op, M, K, N in CASES:
    dtype = DT[dname]
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=dtype, generator=g)
    if op == "mm":
        b = torch.randn(K, N, device="cuda", dtype=dtype, generator=g)
        bias, epi, bb = None, "EpiNone", b
        ref = a.double() @ b.double()

        def fn_t():
            return torch.matmul(a, b)
    else:
        w = torch.randn(N, K, device="cuda", dtype=dtype, generator=g)
        bias = torch.randn(N, device="cuda", dtype=dtype, generator=g)
        epi, bb = "EpiBiasReluScale", w.t()
        ref = torch.relu(a.double() @ w.double().t() + bias.double()) * 0.5

        def fn_t():
            return torch.relu(F.linear(a, w, bias)) / 2

    scale = ref.abs().max().item()
    t_ref = time_cuda(fn_t, runs=30).median
    g_ref = graph_timed(fn_t) if SMALL else None
    err_t = (fn_t().double() - ref).abs().max().item() / scale
    c = torch.empty(M, N, device="cuda", dtype=dtype)
    cells = []
    for cl, grp, pers, bn, st in CONFIGS:
        try:
            p = gemm.plan_for(
                a,
                bb,
                epi,
                "wgmma",
                cluster=cl,
                group=grp,
                persistent=None if pers is None else bool(pers),
                tile_n=bn,
                tma_store=None if st is None else bool(st),
            )
        except ValueError:  # a combination the plan refuses (clusters of 2 on 64-wide tiles)
            cells.append("-")
            continue

        def fn(p=p):
            return gemm.run(p, a, bb, c, bias, 0.5)

        c.fill_(float("nan"))
        fn()
        err = (c.double() - ref).abs().max().item() / scale
        t = time_cuda(fn, runs=30).median
        cell = f"{t:.4f} {t_ref / t:.2f}x {err:.1e}"
        if SMALL:
            g_t = graph_timed(fn)
            cell += f" g {g_t:.4f} {g_ref / g_t:.2f}x"
        cells.append(cell)
    print(
        f"{f'{dname} {op} {M}x{K}x{N}':<26} {t_ref:>9.4f} "
        + " ".join(f"{x:>{38 if SMALL else 22}}" for x in cells)
        + f"   [{err_t:.1e}]"
        + (f" graph {g_ref:.4f}" if SMALL else "")
        + f" {p}",
        flush=True,
    )
torch.backends.cuda.matmul.allow_tf32 = False
