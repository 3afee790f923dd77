"""Probe (GPU, Hopper): the time around a GEMM kernel's CTAs. Each run: the L2 flushed, a
one-thread marker kernel writing %globaltimer, the GEMM, a second marker; for our K-splitting
kernel (timeline build of benchmarks/results/timeline_session17.diff) also the CTAs' first entry
and last end (%globaltimer stamps). Prints, in us, the medians of: marker to marker (the GEMM
with its launch gaps), and for ours marker 1 -> first CTA entry, the CTAs' span, last CTA end ->
marker 2; torch's GEMM (cuBLAS) and an empty kernel for comparison.

With --pairs: the K-splitting kernel's single CTAs against its pairs (clusters of 2 sharing B:
probe_timeline.pair_of), both as timeline builds, at 1024^3 and 1024x4096x1024: what a cluster
launch adds outside the CTAs.

    python benchmarks/probe_gaps.py [reps] [--pairs]
"""
import statistics
import sys

import cupy
import torch

from cupy_ops.bench.timing import L2_FLUSH_BYTES
from cupy_ops.ops import gemm
import probe_timeline as tl
from gemm_cases import operands

reps = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 50
pairs = "--pairs" in sys.argv
MARK = cupy.RawKernel(r'''extern "C" __global__ void mark(unsigned long long* t) {
  unsigned long long v; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v)); *t = v; }''', "mark")
EMPTY = cupy.RawKernel(r'''extern "C" __global__ void empty(int* p) { if (p == nullptr && threadIdx.x == 999) *p = 0; }''', "empty")


def sandwich(fn, stamps=None, n=None):
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    t = torch.zeros(2, dtype=torch.int64, device="cuda")
    rows = []
    for _ in range(reps):
        flush.fill_(1)
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            MARK((1,), (1,), (t.data_ptr(),))
            fn()
            MARK((1,), (1,), (t.data_ptr() + 8,))
        torch.cuda.synchronize()
        t0, t1 = t.tolist()
        row = [(t1 - t0) / 1e3]
        if stamps is not None:
            st = stamps.view(-1, 128)[:n].cpu()
            first, last = int(st[:, 0].min()), int(st[:, 7].max())
            row += [(first - t0) / 1e3, (last - first) / 1e3, (t1 - last) / 1e3]
        rows.append(row)
    return [statistics.median(col) for col in zip(*rows)]


for M, K, N in [] if pairs else [(1024, 1024, 1024), (1024, 4096, 1024), (4096, 4096, 4096)]:
    a, b, bias = operands(torch.bfloat16, M, K, N, "N")
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    p = gemm.plan_for(a, b, "EpiNone", "wgmma")
    gemm.KERNELS.update({"gemm_wgmma_ksplit": tl.build("gemm_wgmma_ksplit", tl.KS, WG_TIMELINE=1),
                         "gemm_wgmma": tl.build("gemm_wgmma", tl.WG, WG_TIMELINE=1)})
    stamps = torch.zeros(132 * 128, dtype=torch.int64, device="cuda")
    n = tl.launch_tl(p, a, b, c, stamps)
    ours = sandwich(lambda: tl.launch_tl(p, a, b, c, stamps), stamps, n)
    gemm.KERNELS.update(tl.TABLE)
    plain = sandwich(lambda: gemm.run(p, a, b, c))
    cublas = sandwich(lambda: torch.matmul(a, b))
    empty = sandwich(lambda: EMPTY((1,), (32,), (0,)))
    print(f"bf16 {M}x{K}x{N} N: marker to marker: ours (timeline build) {ours[0]:.2f} us [marker -> first CTA "
          f"{ours[1]:.2f}, CTAs' span {ours[2]:.2f}, last CTA -> marker {ours[3]:.2f}], ours (table build) "
          f"{plain[0]:.2f}, torch {cublas[0]:.2f}, an empty kernel {empty[0]:.2f}", flush=True)

for M, K, N in [(1024, 1024, 1024), (1024, 4096, 1024)] if pairs else []:
    a, b, bias = operands(torch.bfloat16, M, K, N, "N")
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    p = gemm.plan_for(a, b, "EpiNone", "wgmma")
    gemm.KERNELS.update(tl.TL)
    stamps = torch.zeros(132 * 128, dtype=torch.int64, device="cuda")
    for name, q in (("single CTAs", p), ("pairs", tl.pair_of(p))):
        n = tl.launch_tl(q, a, b, c, stamps)
        r = sandwich(lambda: tl.launch_tl(q, a, b, c, stamps), stamps, n)
        print(f"bf16 {M}x{K}x{N} N, K-splitting kernel, {name} (timeline build): marker to marker {r[0]:.2f} us "
              f"[marker -> first CTA {r[1]:.2f}, CTAs' span {r[2]:.2f}, last CTA -> marker {r[3]:.2f}]", flush=True)
    for name, q, k in (("single CTAs", p, tl.TABLE), ("pairs", tl.pair_of(p), tl.PLAIN)):
        gemm.KERNELS.update(k)
        gemm.run(q, a, b, c)
        r = sandwich(lambda: gemm.run(q, a, b, c))
        print(f"bf16 {M}x{K}x{N} N, K-splitting kernel, {name} (plain build, gemm.run): marker to marker "
              f"{r[0]:.2f} us", flush=True)
    gemm.KERNELS.update(tl.TABLE)
