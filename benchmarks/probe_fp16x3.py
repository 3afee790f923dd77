"""Experiment (GPU, Hopper): ``algo="fp16x3"`` (fp32 as three fp16 products of row-scaled
pieces) against torch fp32 and ``algo="tf32x3"``: error against an fp64 reference (randn,
KernelBench's torch.rand, and rows of wildly different magnitudes), NaN / inf placement
against torch fp32, and speed at the benchmark shapes (the split pass alone too).

    python benchmarks/probe_fp16x3.py | tee benchmarks/results/probe_fp16x3_<gpu>_<session>.log

Error: max |C - ref| / max |ref| over the output (ref = the fp64 product of the fp32 inputs).
"""
import argparse

import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm


def rel_err(c, ref):
    return ((c.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()


def torch_fp32(fn):
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return fn()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def scaled_rows(M, K):
    """randn with each row scaled by 2^U(-60, 60): a per-tensor scale would lose the small rows."""
    return torch.randn(M, K, device="cuda") * torch.exp2(torch.randint(-60, 61, (M, 1), device="cuda").float())


def errors(shapes):
    print("\nerror = max|C - ref| / max|ref| (matmul), and the worst row's own error (rowwise)")
    print(f"{'inputs':<7} {'M x K x N':<16} {'torch fp32':>11} {'tf32x3':>11} {'fp16x3':>11} {'x3h / fp32':>10} "
          f"{'row fp32':>10} {'row x3h':>10}")
    gens = (("randn", torch.randn), ("rand", torch.rand), ("scaled", None))
    for gname, gen in gens:
        for M, K, N in shapes:
            torch.manual_seed(0)
            if gen is None:
                a, b = scaled_rows(M, K), torch.randn(K, N, device="cuda")
            else:
                a, b = gen(M, K, device="cuda"), gen(K, N, device="cuda")
            ref = a.double() @ b.double()
            r32 = torch_fp32(lambda: a @ b)
            rx3 = cupy_ops.matmul(a, b, algo="tf32x3")
            rh = cupy_ops.matmul(a, b, algo="fp16x3")
            e32, ex3, eh = rel_err(r32, ref), rel_err(rx3, ref), rel_err(rh, ref)
            # per row relative to the row's largest reference value: a row-scaled input's small rows
            rowmax = ref.abs().amax(1).clamp_min(1e-300)
            row32 = ((r32.double() - ref).abs().amax(1) / rowmax).max().item()
            rowh = ((rh.double() - ref).abs().amax(1) / rowmax).max().item()
            print(f"{gname:<7} {f'{M}x{K}x{N}':<16} {e32:>11.3e} {ex3:>11.3e} {eh:>11.3e} {eh / e32:>10.2f} "
                  f"{row32:>10.2e} {rowh:>10.2e}", flush=True)


def specials():
    print("\nNaN / inf placement against torch fp32 (same inputs)")
    torch.manual_seed(0)
    ok = True
    # no products past fp32's range: where a sum of such overflows depends on the summation order
    vals = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1.0, -1.0, 1e-40, 2.0 ** -126, 1e15, 3e-39]
    for trial in range(8):
        M, K, N = 257, 259, 131 + trial
        a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
        for t in (a, b):
            idx = torch.randint(0, t.numel(), (40,), device="cuda")
            t.view(-1)[idx] = torch.tensor(vals, device="cuda")[torch.randint(0, len(vals), (40,), device="cuda")]
        if trial % 2:
            a[3] = 1.0
            b[:, 5] = float("inf")
            a[7] = -0.0
            a[10, :] = 1e-40
            b[:, 12] = float("-inf")
            a[20, :] = 1e-41 * torch.rand(K, device="cuda")   # a subnormal row (scaled up by 2^e > 127)
            a[21, :] = 1e15 * torch.randn(K, device="cuda")   # a large row
        ref, got = torch_fp32(lambda: a @ b), cupy_ops.matmul(a, b, algo="fp16x3")
        nan_ok = torch.equal(ref.isnan(), got.isnan())
        inf_ok = torch.equal(ref.isinf(), got.isinf()) and torch.equal(ref[ref.isinf()], got[got.isinf()])
        fin = ref.isfinite()
        exact = a.double() @ b.double()
        e = ((got[fin].double() - exact[fin]).abs() / (a.double().abs() @ b.double().abs())[fin].clamp_min(1e-300))
        print(f"trial {trial}: NaN {'same' if nan_ok else 'DIFFER'}, inf {'same' if inf_ok else 'DIFFER'}, "
              f"max |err| / sum|ab| {e.max().item():.3e}")
        ok &= nan_ok and inf_ok
    print("specials:", "ok" if ok else "MISMATCH")


def speed(shapes, runs):
    print("\nms (median of interleaved runs, L2 flushed): torch fp32, tf32x3, fp16x3, fp16x3's split of both operands")
    print(f"{'op':<8} {'M x K x N':<16} {'torch fp32':>10} {'tf32x3':>8} {'fp16x3':>8} {'split':>8} "
          f"{'x3h/fp32':>9} {'x3h/x3':>7}")
    for op in ("matmul", "linear"):
        for M, K, N in shapes:
            torch.manual_seed(0)
            a = torch.rand(M, K, device="cuda")
            if op == "matmul":
                b = torch.rand(K, N, device="cuda")
                fns = {"fp32": lambda: torch_fp32(lambda: a @ b),
                       "x3": lambda: cupy_ops.matmul(a, b, algo="tf32x3"),
                       "x3h": lambda: cupy_ops.matmul(a, b, algo="fp16x3")}
                bt = b.t()
            else:
                w, bias = torch.rand(N, K, device="cuda"), torch.rand(N, device="cuda")
                fns = {"fp32": lambda: torch_fp32(lambda: torch.relu(F.linear(a, w, bias)) / 2.0),
                       "x3": lambda: cupy_ops.linear_relu_div(a, w, bias, 2.0, algo="tf32x3"),
                       "x3h": lambda: cupy_ops.linear_relu_div(a, w, bias, 2.0, algo="fp16x3")}
                bt = w
            p = gemm.plan_for(a, bt.t(), "EpiNone", "fp16x3")
            fns["split"] = lambda: (gemm.fp16x3_pieces(a, p.a), gemm.fp16x3_pieces_n(bt.t(), p.b)
                                    if p.b.prep == "n-major split" else gemm.fp16x3_pieces(bt, p.b))
            t = time_cuda_interleaved(fns, runs=runs, rounds=5)
            m = {k: v.median for k, v in t.items()}
            print(f"{op:<8} {f'{M}x{K}x{N}':<16} {m['fp32']:>10.4f} {m['x3']:>8.4f} {m['x3h']:>8.4f} {m['split']:>8.4f} "
                  f"{m['fp32'] / m['x3h']:>8.2f}x {m['x3'] / m['x3h']:>6.2f}x   "
                  f"(p80/p20 x3h {t['x3h'].p80 / t['x3h'].p20:.2f}); plan: {p}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    print(describe(environment()))
    shapes = [(1024, 1024, 1024), (4096, 4096, 4096), (1024, 8192, 8192)]
    specials()
    errors(shapes if not args.quick else shapes[:1])
    speed(shapes + [(2048, 2048, 2048), (1024, 2048, 2048), (256, 1024, 1024)], args.runs)


if __name__ == "__main__":
    main()
