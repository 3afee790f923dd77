"""Experiment (GPU, Hopper): fp16x3_split's geometry. The split of an fp32 operand (rows, K)
into scaled fp16 pieces, one block per row holding X3H_SPLIT_VECS float4 per thread in
registers (so a row of up to THREADS * VECS * 4 values is read from memory once), timed for
several (threads, vecs) against session 12's kernel (one warp per row, the row read twice)
and against a copy of the same bytes (torch: read 4 bytes, write 4 bytes a value: the floor
of a one-read split). Every variant's pieces are checked bit for bit against the default's.
Then matmul's row-major b: a transpose pass and the row split (K-major pieces) against
fp16x3_colmax_n + fp16x3_split_n (N-major pieces; the same values, checked). Then the layer
and matmul at the benchmark shapes with the default split, against torch fp32.

    python benchmarks/probe_fp16x3_split.py [--n-major] | tee benchmarks/results/probe_fp16x3_split_<gpu>_<session>.log

--n-major: skip the row split's geometries.
"""
import sys

import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops import Kernel
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm, gemm_plan

GEOMETRIES = [(128, 16), (256, 8), (512, 4), (1024, 2), (256, 4), (512, 8)]
SHAPES = [(8192, 8192), (1024, 8192), (4096, 4096), (1024, 1024), (2048, 32768)]

# Session 12's fp16x3_split (commit 9e28e7a), kept here as the baseline: one warp per row, the
# row's max over a first read, the pieces from a second.
WARP_SPLIT = "".join(f"#define {k} {v}\n" for k, v in gemm_plan.SM90A_DEFINES.items()) + r'''
#include "gemm_fp16x3.cuh"
extern "C" __global__ void __launch_bounds__(256)
    fp16x3_split_warp(const float* __restrict__ x, long long ld, int rows, int K, unsigned short* __restrict__ hi,
                      unsigned short* __restrict__ lo, long long ldo, int* __restrict__ ex) {
  const int lane = threadIdx.x & 31;
  const i64 row = (i64)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const float* xr = x + row * ld;
  const int K4 = K / 4;
  u32 mag = 0;
  for (int k = lane; k < K4; k += 32) mag = x3h_max_finite4(mag, *reinterpret_cast<const float4*>(xr + 4 * k));
  for (int k = 4 * K4 + lane; k < K; k += 32) mag = x3h_max_finite(mag, xr[k]);
  mag = __reduce_max_sync(0xffffffffu, mag);
  const int e = x3h_exponent(mag);
  if (lane == 0) ex[row] = e;
  u16* hr = hi + row * ldo;
  u16* lr = lo + row * ldo;
  for (int k = lane; k < K4; k += 32) x3h_split4(*reinterpret_cast<const float4*>(xr + 4 * k), e, hr + 4 * k, lr + 4 * k);
  for (int k = 4 * K4 + lane; k < K; k += 32) x3h_split1(xr[k], e, hr[k], lr[k]);
}
'''


def splitter(threads, vecs):
    defines = dict(gemm_plan.SM90A_DEFINES, X3H_SPLIT_THREADS=threads, X3H_SPLIT_VECS=vecs)
    k = Kernel.builtin("gemm_sm90a.cu", "fp16x3_split", ["fp16x3_split"], arch="sm_90a", defines=defines)
    h = k.handle("fp16x3_split", torch.cuda.current_device())

    def run(x, pieces, ex):
        rows, K = x.shape
        cupy_ops.launch.launch(h, (rows, 1, 1), (threads, 1, 1), (x.data_ptr(), K, rows, K, pieces[0].data_ptr(),
                                                                    pieces[1].data_ptr(), pieces.shape[2],
                                                                    ex.data_ptr()))
    return run


def main():
    print(describe(environment()))
    n_major_only = "--n-major" in sys.argv
    warp = Kernel(WARP_SPLIT, "fp16x3_split_warp")
    print("\nms (median of interleaved runs, L2 flushed); GB/s = (4 bytes read + 4 written) a value / time")
    head = ["copy"] + ["warp x2 read"] + [f"{t}x{v}" for t, v in GEOMETRIES]
    print(f"{'rows x K':<12}" + "".join(f"{h:>14}" for h in head))
    for rows, K in ([] if n_major_only else SHAPES):
        torch.manual_seed(0)
        x = torch.randn(rows, K, device="cuda")
        ldo = -(-K // 8) * 8
        outs = {h: (torch.empty((2, rows, ldo), dtype=torch.float16, device="cuda"),
                    torch.empty(rows, dtype=torch.int32, device="cuda")) for h in head}
        dst = torch.empty_like(x)
        fns = {"copy": lambda: dst.copy_(x)}
        p, e = outs["warp x2 read"]
        fns["warp x2 read"] = (lambda p=p, e=e: warp(x, K, rows, K, p[0], p[1], ldo, e, grid=-(-rows // 8),
                                                     block=256))
        for (t, v), h in zip(GEOMETRIES, head[2:]):
            run, (p, e) = splitter(t, v), outs[h]
            fns[h] = (lambda run=run, p=p, e=e: run(x, p, e))
        stats = time_cuda_interleaved(fns, runs=60, rounds=3)
        ref_p, ref_e = outs["256x8"]
        for h in head[1:]:
            p, e = outs[h]
            if not (torch.equal(p.view(torch.int16), ref_p.view(torch.int16)) and torch.equal(e, ref_e)):
                raise SystemExit(f"{h}: pieces differ from 256x8's at {rows}x{K}")
        gbs = 8 * rows * K / 1e6
        print(f"{f'{rows}x{K}':<12}" + "".join(f"{stats[h].median:>8.4f} {gbs / stats[h].median:>4.0f}" + " " * 1
                                               for h in head))
    print("\nmatmul's row-major b (K x N), each column scaled: a transpose pass + the row split into K-major"
          " pieces (until session 13) against fp16x3_colmax_n + fp16x3_split_n into N-major pieces; ms, GB/s as above")
    print(f"{'K x N':<12}{'copy':>14}{'transpose+split':>18}{'colmax+split_n':>18}")
    for K, N in ((4096, 4096), (8192, 8192), (8192, 1024), (1024, 8192)):
        torch.manual_seed(0)
        b = torch.randn(K, N, device="cuda")
        bt, dst = b.t(), torch.empty_like(b)
        old = lambda: gemm.fp16x3_pieces(bt, gemm_plan.Operand("transpose", True, K))
        new = lambda: gemm.fp16x3_pieces_n(b, gemm_plan.Operand("n-major split", False, N))
        (po, eo), (pn, en) = old(), new()
        if not (torch.equal(po.view(torch.int16), pn.transpose(1, 2).view(torch.int16)) and torch.equal(eo, en)):
            raise SystemExit(f"colmax_n + split_n: pieces differ from transpose + split at {K}x{N}")
        st = time_cuda_interleaved({"copy": lambda: dst.copy_(b), "old": old, "new": new}, runs=60, rounds=3)
        gbs = 8 * K * N / 1e6
        print(f"{f'{K}x{N}':<12}" + "".join(f"{st[h].median:>12.4f} {gbs / st[h].median:>4.0f}" for h in
                                            ("copy", "old", "new")))
    print("\nthe N-major split's rows per block (X3H_COLMAX_ROWS, X3H_NSPLIT_ROWS): colmax_n + split_n, ms")
    geos = [(32, 32), (64, 16), (64, 8), (128, 8), (32, 8), (128, 4)]
    print(f"{'K x N':<12}" + "".join(f"{f'{c} / {r}':>10}" for c, r in geos))
    variants = {g: {n: Kernel.builtin("gemm_sm90a.cu", n, {None: n}, arch="sm_90a",
                                      defines=dict(gemm_plan.SM90A_DEFINES, X3H_COLMAX_ROWS=g[0], X3H_NSPLIT_ROWS=g[1]))
                    for n in ("fp16x3_colmax_n", "fp16x3_split_n")} for g in geos}
    for K, N in ((4096, 4096), (8192, 8192), (8192, 1024), (1024, 8192), (4096, 256)):
        torch.manual_seed(0)
        b = torch.randn(K, N, device="cuda")
        ref_p, ref_e = gemm.fp16x3_pieces_n(b, gemm_plan.Operand("n-major split", False, N))

        def run(g, out):
            cols = -(-N // (4 * gemm_plan.X3H_NSPLIT_THREADS))
            p, e = out
            mag = torch.zeros(N, dtype=torch.int32, device="cuda")
            variants[g]["fp16x3_colmax_n"](b, N, K, N, mag, grid=(cols, min(-(-K // g[0]), 65535)),
                                           block=gemm_plan.X3H_NSPLIT_THREADS)
            variants[g]["fp16x3_split_n"](b, N, K, N, mag, p[0], p[1], p.shape[2], e,
                                          grid=(cols, min(-(-K // g[1]), 65535)), block=gemm_plan.X3H_NSPLIT_THREADS)
        outs = {g: (torch.empty_like(ref_p), torch.empty_like(ref_e)) for g in geos}
        st = time_cuda_interleaved({g: (lambda g=g: run(g, outs[g])) for g in geos}, runs=60, rounds=3)
        for g in geos:
            if not (torch.equal(outs[g][0].view(torch.int16), ref_p.view(torch.int16)) and torch.equal(outs[g][1], ref_e)):
                raise SystemExit(f"{g}: pieces differ at {K}x{N}")
        print(f"{f'{K}x{N}':<12}" + "".join(f"{st[g].median:>10.4f}" for g in geos))
    print("\nthe default split (gemm_plan: X3H_SPLIT_THREADS, X3H_SPLIT_VECS ="
          f" {gemm_plan.X3H_SPLIT_THREADS}, {gemm_plan.X3H_SPLIT_VECS}) in the ops, against torch fp32")
    torch.backends.cuda.matmul.allow_tf32 = False
    for op, M, K, N in (("linear", 1024, 8192, 8192), ("matmul", 4096, 4096, 4096), ("linear", 4096, 4096, 4096),
                        ("matmul", 1024, 8192, 8192)):
        torch.manual_seed(0)
        x = torch.rand(M, K, device="cuda")
        if op == "linear":
            w, bias = torch.rand(N, K, device="cuda"), torch.rand(N, device="cuda")
            fns = {"torch": lambda: torch.relu(F.linear(x, w, bias)) / 2.0,
                   "fp16x3": lambda: cupy_ops.linear_relu_div(x, w, bias, 2.0, algo="fp16x3")}
        else:
            b = torch.rand(K, N, device="cuda")
            fns = {"torch": lambda: x @ b, "fp16x3": lambda: cupy_ops.matmul(x, b, algo="fp16x3")}
        st = time_cuda_interleaved(fns, runs=40, rounds=4)
        print(f"{op:<7} {M}x{K}x{N:<6} torch fp32 {st['torch'].median:.4f} ms  fp16x3 {st['fp16x3'].median:.4f} ms  "
              f"{st['torch'].median / st['fp16x3'].median:.2f}x  (p80/p20 {st['fp16x3'].p80 / st['fp16x3'].p20:.2f})")


if __name__ == "__main__":
    main()
