"""Experiment (GPU, Hopper): the 3xTF32 GEMM (``algo="tf32x3"``) against torch fp32 and TF32:
its error against an fp64 reference next to torch's own on the same inputs (randn and
KernelBench's ``torch.rand``), NaN / inf placement against torch fp32, and its speed at the
benchmark shapes without split-K and as the plan chooses.

    python benchmarks/probe_tf32x3.py | tee benchmarks/results/probe_tf32x3_<gpu>_run<N>.log

Error: max |C - ref| / max |ref| over the output (ref = the fp64 product of the fp32 inputs).
"""
import argparse

import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import gemm


def rel_err(c: torch.Tensor, ref: torch.Tensor) -> float:
    return ((c.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()


def torch_mm(a, b, tf32: bool):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def errors(shapes, gens):
    print(f"\nerror = max|C - ref| / max|ref|, ref in fp64")
    print(f"{'inputs':<6} {'M x K x N':<16} {'torch fp32':>11} {'torch tf32':>11} {'wgmma tf32':>11} {'tf32x3':>11} "
          f"{'x3 / fp32':>9}")
    for gname, gen in gens:
        for M, K, N in shapes:
            a, b = gen(M, K), gen(K, N)
            ref = a.double() @ b.double()
            e32 = rel_err(torch_mm(a, b, False), ref)
            etf = rel_err(torch_mm(a, b, True), ref)
            ewg = rel_err(cupy_ops.matmul(a, b, algo="wgmma"), ref)
            ex3 = rel_err(cupy_ops.matmul(a, b, algo="tf32x3"), ref)
            print(f"{gname:<6} {f'{M}x{K}x{N}':<16} {e32:>11.3e} {etf:>11.3e} {ewg:>11.3e} {ex3:>11.3e} {ex3 / e32:>9.2f}",
                  flush=True)


def specials():
    print("\nNaN / inf placement against torch fp32 (same inputs)")
    torch.manual_seed(0)
    M = K = N = 257
    ok = True
    # no values near fp32's maximum: where a sum overflows depends on the summation order
    vals = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1.0, -1.0, 1e-40, 2.0 ** -126, 1e30]
    for trial in range(6):
        a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
        for t in (a, b):
            idx = torch.randint(0, t.numel(), (40,), device="cuda")
            t.view(-1)[idx] = torch.tensor(vals, device="cuda")[torch.randint(0, len(vals), (40,), device="cuda")]
        if trial % 2:
            a[3] = 1.0            # TF32-exact rows and columns (lo = 0) meeting inf
            b[:, 5] = float("inf")
        ref, ours = torch_mm(a, b, False), cupy_ops.matmul(a, b, algo="tf32x3")
        nan_diff = int((ref.isnan() != ours.isnan()).sum())
        inf_diff = int(((ref.isinf() | ours.isinf()) & (ref != ours) & ~(ref.isnan() | ours.isnan())).sum())
        fin = ref.isfinite() & ours.isfinite()
        rel = ((ref[fin].double() - ours[fin].double()).abs() / ref[fin].double().abs().clamp_min(1e-30)).median().item()
        print(f"  trial {trial}: NaN {int(ref.isnan().sum())} ({nan_diff} placed differently), inf "
              f"{int(ref.isinf().sum())} ({inf_diff} differ), finite: median relative difference {rel:.2e}")
        ok &= nan_diff == 0 and inf_diff == 0
    print(f"  specials {'OK' if ok else 'DIFFER'}")


def speed(shapes):
    print("\nspeed (median ms, L2 flushed; ratio = torch fp32 time / ours)")
    print(f"{'op':<7} {'M x K x N':<16} {'torch fp32':>10} {'torch tf32':>10} {'wgmma tf32':>10} "
          f"{'x3 no split':>17} {'x3 auto':>17}")
    for M, K, N in shapes:
        a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
        w = b.t().contiguous()
        bias = torch.randn(N, device="cuda")
        c = torch.empty(M, N, device="cuda")
        for op in ("matmul", "linear"):
            if op == "matmul":
                bb, epi, ref = b, "EpiNone", (lambda tf: (lambda: torch_mm(a, b, tf)))
            else:
                bb, epi = w.t(), "EpiBiasReluScale"

                def ref(tf):
                    def f():
                        torch.backends.cuda.matmul.allow_tf32 = tf
                        try:
                            return torch.relu(F.linear(a, w, bias)) / 2
                        finally:
                            torch.backends.cuda.matmul.allow_tf32 = False
                    return f
            t32 = time_cuda(ref(False), runs=20).median
            ttf = time_cuda(ref(True), runs=20).median
            pw = gemm.plan_for(a, bb, epi, "wgmma")
            twg = time_cuda(lambda: gemm.run(pw, a, bb, c, bias if epi != "EpiNone" else None, 0.5), runs=20).median
            cells = []
            for p in (gemm.plan_for(a, bb, epi, "tf32x3", split_k=False), gemm.plan_for(a, bb, epi, "tf32x3")):
                t = time_cuda(lambda p=p: gemm.run(p, a, bb, c, bias if epi != "EpiNone" else None, 0.5),
                              runs=20).median
                cells.append(f"{t:>8.4f} ({t32 / t:.2f}x)")
            print(f"{op:<7} {f'{M}x{K}x{N}':<16} {t32:>10.4f} {ttf:>10.4f} {twg:>10.4f} " + " ".join(cells), flush=True)


def split_table(shapes, waves=(0.25, 0.5, 1.0)):
    """X3_SPLIT_MAX_WAVES candidates: the plan (and its time) at each threshold."""
    print("\nsplit-K threshold (gemm_plan.X3_SPLIT_MAX_WAVES): median ms (ratio to torch fp32), plan's split")
    print(f"{'op':<7} {'M x K x N':<16} {'torch fp32':>10} " + " ".join(f"{f'<= {w} waves':>24}" for w in waves))
    saved = gemm.gemm_plan.X3_SPLIT_MAX_WAVES
    for M, K, N in shapes:
        a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
        w = b.t().contiguous()
        bias = torch.randn(N, device="cuda")
        c = torch.empty(M, N, device="cuda")
        for op, bb, epi, ref in (("matmul", b, "EpiNone", lambda: torch_mm(a, b, False)),
                                 ("linear", w.t(), "EpiBiasReluScale", lambda: torch.relu(F.linear(a, w, bias)) / 2)):
            t32 = time_cuda(ref, runs=20).median
            cells = []
            for wv in waves:
                gemm.gemm_plan.X3_SPLIT_MAX_WAVES = wv
                gemm._plans.clear()
                p = gemm.plan_for(a, bb, epi, "tf32x3")
                t = time_cuda(lambda p=p: gemm.run(p, a, bb, c, bias if epi != "EpiNone" else None, 0.5),
                              runs=20).median
                cells.append(f"{t:>8.4f} ({t32 / t:.2f}x) x{p.slices:<2}")
            print(f"{op:<7} {f'{M}x{K}x{N}':<16} {t32:>10.4f} " + " ".join(f"{c:>24}" for c in cells), flush=True)
    gemm.gemm_plan.X3_SPLIT_MAX_WAVES = saved
    gemm._plans.clear()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes only")
    ap.add_argument("--errors-only", action="store_true", help="the error table and special values only")
    args = ap.parse_args()
    print(describe(environment()))
    torch.manual_seed(0)
    small = [(1, 1, 1), (3, 5, 7), (127, 129, 131), (129, 4097, 3), (300, 1000, 257)]
    big = [(1024, 1024, 1024), (4096, 4096, 4096), (1024, 8192, 8192)]
    gens = [("randn", lambda r, c: torch.randn(r, c, device="cuda")),
            ("rand", lambda r, c: torch.rand(r, c, device="cuda"))]
    errors(small if args.quick else small + big, gens)
    specials()
    if args.errors_only:
        raise SystemExit(0)
    split_table([(256, 1024, 1024), (1024, 1024, 1024), (2048, 2048, 2048)])
    speed([(1024, 1024, 1024)] if args.quick else [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
                                                  (1024, 8192, 8192), (8192, 8192, 8192)])
