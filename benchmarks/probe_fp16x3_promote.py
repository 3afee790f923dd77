"""Experiment (GPU, Hopper): how gemm_fp16x3's consumer warpgroups wait for their wgmmas.
Each waits for its k-tile's 12 wgmmas to finish (wgmma.wait_group 0) before adding the partial
sum into the fp32 sum and issuing the next k-tile's. Variants (defines): "p1" as landed in
session 12; "p2" X3H_PROMOTE_EVERY = 2: two k-tiles' wgmmas back to back, the wait every other
k-tile (a partial sum of 128 values of K in the tensor cores instead of 64: more error);
"ord" X3H_ORDERED = 1: the two warpgroups take turns issuing k-tiles (named barriers), so one
waits and promotes while the tensor cores run the other's (same arithmetic as p1, so the
same bits); "ord p2" both. Since session 13 the kernel's defaults are those of "ord". Speed against torch fp32 (interleaved, L2 flushed) and error
against an fp64 reference (max |C - ref| / max |ref|) at the benchmark shapes, same inputs.

    python benchmarks/probe_fp16x3_promote.py | tee benchmarks/results/probe_fp16x3_promote_<gpu>_<session>.log
    python benchmarks/probe_fp16x3_promote.py --ncu ord   # one call per shape with that variant (for ncu)
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


def kernels(every, ordered):
    defines = dict(gemm_plan.SM90A_DEFINES, X3H_PROMOTE_EVERY=every, X3H_ORDERED=ordered)
    return {n: Kernel.builtin("gemm_sm90a.cu", n, gemm.KERNELS[n].expressions, arch="sm_90a", defines=defines)
            for n in NAMES}


VARIANTS = {"p1": kernels(1, 0), "p2": kernels(2, 0), "ord": kernels(1, 1), "ord p2": kernels(2, 1)}


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
    ap.add_argument("--ncu", choices=tuple(VARIANTS))
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
    names = list(VARIANTS)
    print("\nerror = max|C - ref| / max|ref|; same inputs for all; 'same bits': ord's output equals p1's")
    print(f"{'op':<7} {'inputs':<6} {'M x K x N':<16} {'torch fp32':>11}" + "".join(f"{n:>11}" for n in names)
          + f" {'same bits':>10}")
    for op, M, K, N in SHAPES:
        for gname, gen in (("randn", torch.randn), ("rand", torch.rand)):
            torch.manual_seed(0)
            a, b = inputs(op, M, K, N, gen)
            ref = reference(op, a, b)
            scale = ref.abs().max().item()
            errs, outs = [((torch_fp32(op, a, b).double() - ref).abs().max().item()) / scale], {}
            for name in names:
                use(name)
                outs[name] = call(op, a, b)
                errs.append((outs[name].double() - ref).abs().max().item() / scale)
            print(f"{op:<7} {gname:<6} {f'{M}x{K}x{N}':<16}" + "".join(f"{e:>11.3e}" for e in errs)
                  + f" {str(torch.equal(outs['ord'], outs['p1'])):>10}", flush=True)
    print("\nms (median of interleaved runs, L2 flushed; torch.rand inputs); x: torch fp32's time / the variant's")
    print(f"{'op':<7} {'M x K x N':<16} {'torch fp32':>10}" + "".join(f"{n:>9} {'x':>6}" for n in names) + "  p80/p20")
    for op, M, K, N in SHAPES:
        torch.manual_seed(0)
        a, b = inputs(op, M, K, N, torch.rand)

        def run(name):
            use(name)
            return call(op, a, b)
        fns = {"torch": lambda: torch_fp32(op, a, b)}
        fns.update({n: (lambda n=n: run(n)) for n in names})
        st = time_cuda_interleaved(fns, runs=60, rounds=6)
        m = {k: v.median for k, v in st.items()}
        print(f"{op:<7} {f'{M}x{K}x{N}':<16} {m['torch']:>10.4f}"
              + "".join(f"{m[n]:>9.4f} {m['torch'] / m[n]:>5.2f}x" for n in names)
              + "  " + " ".join(f"{st[n].p80 / st[n].p20:.2f}" for n in names), flush=True)


if __name__ == "__main__":
    main()
