"""Probe (GPU, Hopper): where the Hopper GEMM's time goes inside each CTA, and the K-splitting
kernel as pairs sharing B at 9 stages. Needs the kernel edit of
benchmarks/results/timeline_session17.diff (the WG_TIMELINE stamps, gemm_wgmma_ksplit's CM).

Part 1 (timeline): builds with -DWG_TIMELINE write clock64 stamps per CTA (slots: see the diff)
into a buffer passed as the kernel's bias pointer (EpiNone does not read it). Each case: L2
flushed, one launch, stamps read; `reps` times; per event the median over CTAs and launches of
(event - the CTA's entry), in cycles; the CTAs' span by %globaltimer and the CUDA events' time
of the same launches. The stamps cost ~1 us at 1024^3 (probe_gaps.py): compare timeline builds
with each other, and time the table's build without them.

Part 2 (timing): torch, the table's K-splitting plan, and the same kernel as pairs of
vertically adjacent 64 x 128 tiles sharing B (each CTA loads half of B, multicast), timed in
interleaved rounds (L2 flushed), bit for bit against the table's result.

    python benchmarks/probe_timeline.py [reps]
"""
import dataclasses
import statistics
import sys

import torch

from cupy_ops import launch
from cupy_ops.bench.timing import L2_FLUSH_BYTES, time_cuda_interleaved
from cupy_ops.kernel import Kernel
from cupy_ops.ops import gemm, gemm_plan, tma
from gemm_cases import case_name, operands, prepared, ratios, runner

reps = int(sys.argv[1]) if __name__ == "__main__" and len(sys.argv) > 1 else 20
torch.manual_seed(0)
V = gemm_plan.variants()["gemm_sm90a.cu"]
KS = [e for e in V if e.startswith("gemm_wgmma_ksplit<")]
KS2 = [e[:-1] + ", 2>" for e in KS]
WG = [e for e in V if e.startswith("gemm_wgmma<")]


def build(name, exprs, **extra):
    return Kernel.builtin("gemm_sm90a.cu", name, exprs, arch="sm_90a", defines=dict(gemm_plan.SM90A_DEFINES, **extra))


TABLE = dict(gemm.KERNELS)
PLAIN = {"gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS + KS2)}
TL = {"gemm_wgmma_ksplit": build("gemm_wgmma_ksplit", KS + KS2, WG_TIMELINE=1),
      "gemm_wgmma": build("gemm_wgmma", WG, WG_TIMELINE=1)}


def pair_of(p):
    """The K-splitting plan ``p`` as pairs of vertically adjacent tiles sharing B: the same
    grid (one CTA per 64 x 128 tile; M a multiple of 128 here), clusters of 2."""
    return dataclasses.replace(p, kernel=p.kernel[:-1] + ", 2>", cluster=2)


def launch_tl(p, a, b, c, stamps):
    """gemm._run_hopper's plain wgmma launch (TMA-store epilogue, EpiNone), the bias pointer
    the stamp buffer."""
    (M, K), N = a.shape, b.shape[1]
    h = gemm._handle(p.kernel, c.get_device())
    a_map, b_map, keep = gemm._maps(p, a, b)
    grid = p.grid
    if p.persistent:
        grid = (min(p.grid[0], p.cluster * max(launch.resident_clusters(h, p.cluster, p.block, p.smem), 1)), 1, 1)
    c_map = tma.tensor_map(c, N, M, N, 128 // c.element_size(), gemm_plan.WG_STORE_ROWS, exact=True)
    launch.launch(h, grid, p.block, (a_map, b_map, c_map, 1, c.data_ptr(), N, M, N, K, p.group, stamps.data_ptr(), 1.0),
                  p.smem, p.cluster)
    del keep
    return grid[0]


EVENTS = [("sync", 3), ("first load issued", 4), ("last load issued", 5), ("wg0 k-tile 0 data", 64),
          ("wg0 k-tile 1 data", 65), ("wg0 k-tile 4 data", 68), ("wg0 k-tile 8 data", 72), ("wg0 k-tile 12 data", 76),
          ("wg0 k-tile 15 data", 79), ("wg0 k-tile 31 data", 95), ("wg0 unit 0 loop done", 8),
          ("wg1 unit 0 loop done", 9), ("producer after setmaxnreg", 36), ("wg0 reduced", 6), ("wg0 unit 0 stored", 20), ("wg1 unit 0 stored", 21),
          ("wg0 unit 1 loop done", 10), ("wg0 unit 1 stored", 22), ("wg0 unit 2 loop done", 12),
          ("wg0 unit 2 stored", 24), ("wg0 unit 3 loop done", 14), ("wg0 unit 3 stored", 26), ("wg0 end", 32),
          ("wg1 end", 33)]


def timeline(label, p, a, b, c):
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    grid = p.grid[0] if not p.persistent else 132
    stamps = torch.zeros(grid * 128, dtype=torch.int64, device="cuda")
    rel = {e: [] for e, _ in EVENTS}
    span, ev_ms, skew, rate = [], [], [], []
    for _ in range(reps):
        stamps.zero_()
        flush.fill_(1)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        n = launch_tl(p, a, b, c, stamps)
        e.record()
        torch.cuda.synchronize()
        ev_ms.append(s.elapsed_time(e))
        st = stamps.view(-1, 128)[:n].cpu()
        entry_gt = st[:, 0]
        skew.append(int(entry_gt.max() - entry_gt.min()))
        span.append(int(st[:, 7].max() - entry_gt.min()))
        clk = (st[:, 32] - st[:, 2]).double()
        gt = (st[:, 7] - st[:, 0]).double()
        ok = gt > 0
        rate.append(float((clk[ok] / gt[ok]).median()))
        for name, slot in EVENTS:
            v = st[:, slot]
            have = v != 0
            if have.any():
                rel[name] += (v[have] - st[have, 2]).tolist()
    ghz = statistics.median(rate)
    print(f"-- {label}: {p.kernel}, grid {p.grid}, cluster {p.cluster}; events {statistics.median(ev_ms) * 1e3:.2f} us, "
          f"CTAs' span (globaltimer) {statistics.median(span) / 1e3:.2f} us, entry skew {statistics.median(skew) / 1e3:.2f} us, "
          f"{ghz:.3f} GHz", flush=True)
    for name, _ in EVENTS:
        v = sorted(rel[name])
        if v:
            q = lambda f: v[min(len(v) - 1, int(f * len(v)))]
            print(f"   {name:22s} median {q(0.5):8d} cyc ({q(0.5) / ghz / 1e3:6.2f} us)  p10 {q(0.1):8d}  p90 {q(0.9):8d}  max {v[-1]:8d}",
                  flush=True)


def part1():
    """Timelines of the table's plans (and the K-splitting pairs)."""
    TL_CASES = [(torch.bfloat16, 1024, 1024, 1024), (torch.bfloat16, 1024, 4096, 1024), (torch.bfloat16, 4096, 4096, 4096)]
    for dt, M, K, N in TL_CASES:
        a, b, bias = operands(dt, M, K, N, "N")
        c = torch.empty(M, N, device="cuda", dtype=dt)
        p = gemm.plan_for(a, b, "EpiNone", "wgmma")
        gemm.KERNELS.update(TL)
        name = case_name(dt, False, M, K, N, "N")
        timeline(f"{name} table", p, a, b, c)
        if p.ksplit:
            timeline(f"{name} pair", pair_of(p), a, b, c)
        gemm.KERNELS.update(TABLE)


def part2():
    """Timing, single CTAs against pairs."""
    SHAPES = [(torch.bfloat16, False, 1024, 1024, 1024, "N", "EpiNone"),
              (torch.float16, False, 1024, 1024, 1024, "N", "EpiNone"),
              (torch.bfloat16, False, 1024, 4096, 1024, "N", "EpiNone"),
              (torch.bfloat16, False, 256, 1024, 1024, "K", "EpiBiasReluScale"),
              (torch.float32, True, 1024, 1024, 1024, "K", "EpiBiasReluScale")]
    for rnd in range(2):
        for (dt, tf32, M, K, N, layout, epi), a, b, bias, c, fns in prepared(SHAPES):
            p = gemm.plan_for(a, b, epi, "wgmma")
            assert p.ksplit, p
            fns["table"] = runner(p, a, b, c, bias, TABLE)
            fns["table"]()
            ref = c.clone()
            fns["pair"] = runner(pair_of(p), a, b, c, bias, PLAIN)
            fns["pair"]()
            assert torch.equal(c, ref), "pair"
            t = time_cuda_interleaved(fns, runs=300)
            print(f"{rnd} {case_name(dt, tf32, M, K, N, layout):24s}", ratios(t, ("table", "pair")), flush=True)
            gemm.KERNELS.update(TABLE)


if __name__ == "__main__":
    part1()
    part2()
