"""Experiment (GPU, Hopper): gemm_fp16x3's k-tiles per promotion (X3H_PROMOTE_EVERY). With 1,
each consumer warpgroup waits for its k-tile's 12 wgmmas to finish (wgmma.wait_group 0) before
adding the partial sum into the fp32 sum and issuing the next k-tile's; with 2, two k-tiles'
wgmmas run back to back and the wait comes every other k-tile (a partial sum of 128 values of
K in the tensor cores instead of 64). Speed against torch fp32 (interleaved, L2 flushed) and
error against an fp64 reference (max |C - ref| / max |ref|) at the benchmark shapes, both on
the same inputs.

    python benchmarks/probe_fp16x3_promote.py | tee benchmarks/results/probe_fp16x3_promote_<gpu>_<session>.log
    python benchmarks/probe_fp16x3_promote.py --ncu P   # one call per shape with X3H_PROMOTE_EVERY = P (for ncu)
"""
import argparse

import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops import Kernel
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda_interleaved
from cupy_ops.ops import gemm, gemm_plan

NAMES = ("gemm_fp16x3", "gemm_fp16x3_partial")
SHAPES = [("matmul", 4096, 4096, 4096), ("linear", 1024, 8192, 8192), ("matmul", 1024, 8192, 8192),
          ("linear", 4096, 4096, 4096), ("matmul", 1024, 1024, 1024)]


def kernels(every):
    defines = dict(gemm_plan.SM90A_DEFINES, X3H_PROMOTE_EVERY=every)
    return {n: Kernel.builtin("gemm_sm90a.cu", n, gemm.KERNELS[n].expressions, arch="sm_90a", defines=defines)
            for n in NAMES}


VARIANTS = {1: kernels(1), 2: kernels(2)}


def use(every):
    gemm.KERNELS.update(VARIANTS[every])


def call(op, a, b):
    if op == "linear":
        w, bias = b
        return cupy_ops.linear_relu_div(a, w, bias, 2.0, algo="fp16x3")
    return cupy_ops.matmul(a, b, algo="fp16x3")


def inputs(op, M, K, N, gen):
    a = gen(M, K, device="cuda")
    b = (gen(N, K, device="cuda"), gen(N, device="cuda")) if op == "linear" else gen(K, N, device="cuda")
    return a, b


def reference(op, a, b):
    if op == "linear":
        w, bias = b
        return torch.relu(a.double() @ w.double().t() + bias.double()) / 2.0
    return a.double() @ b.double()


def torch_fp32(op, a, b):
    if op == "linear":
        w, bias = b
        return torch.relu(F.linear(a, w, bias)) / 2.0
    return a @ b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncu", type=int, choices=(1, 2))
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.ncu:
        use(args.ncu)
        for op, M, K, N in SHAPES[:2]:
            a, b = inputs(op, M, K, N, torch.rand)
            call(op, a, b)
        torch.cuda.synchronize()
        return
    print(describe(environment()))
    print("\nerror = max|C - ref| / max|ref|; same inputs for all")
    print(f"{'op':<7} {'inputs':<6} {'M x K x N':<16} {'torch fp32':>11} {'every 1':>11} {'every 2':>11} {'2 / fp32':>9}")
    for op, M, K, N in SHAPES:
        for gname, gen in (("randn", torch.randn), ("rand", torch.rand)):
            torch.manual_seed(0)
            a, b = inputs(op, M, K, N, gen)
            ref = reference(op, a, b)
            scale = ref.abs().max().item()
            errs = [((torch_fp32(op, a, b).double() - ref).abs().max().item()) / scale]
            for every in (1, 2):
                use(every)
                errs.append((call(op, a, b).double() - ref).abs().max().item() / scale)
            print(f"{op:<7} {gname:<6} {f'{M}x{K}x{N}':<16} {errs[0]:>11.3e} {errs[1]:>11.3e} {errs[2]:>11.3e} "
                  f"{errs[2] / errs[0]:>9.2f}", flush=True)
    print("\nms (median of interleaved runs, L2 flushed; torch.rand inputs)")
    print(f"{'op':<7} {'M x K x N':<16} {'torch fp32':>10} {'every 1':>9} {'every 2':>9} {'1: x torch':>11} "
          f"{'2: x torch':>11} {'2 / 1':>7}")
    for op, M, K, N in SHAPES:
        torch.manual_seed(0)
        a, b = inputs(op, M, K, N, torch.rand)

        def run(every):
            use(every)
            return call(op, a, b)
        fns = {"torch": lambda: torch_fp32(op, a, b), 1: lambda: run(1), 2: lambda: run(2)}
        st = time_cuda_interleaved(fns, runs=60, rounds=6)
        m = {k: v.median for k, v in st.items()}
        print(f"{op:<7} {f'{M}x{K}x{N}':<16} {m['torch']:>10.4f} {m[1]:>9.4f} {m[2]:>9.4f} {m['torch'] / m[1]:>10.2f}x "
              f"{m['torch'] / m[2]:>10.2f}x {m[1] / m[2]:>6.3f}x  (p80/p20 {st[1].p80 / st[1].p20:.2f} / "
              f"{st[2].p80 / st[2].p20:.2f})", flush=True)


if __name__ == "__main__":
    main()
