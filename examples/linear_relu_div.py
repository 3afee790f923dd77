"""Main job: KernelBench level2/63 (Linear -> ReLU -> divide) with every cupy_ops variant.

Builds Model (torch) and each ModelNew variant with identical weights, checks them the
KernelBench way (5 trials on torch.rand inputs, allclose atol=rtol=1e-4 for fp32, 1e-2 for
fp16/bf16) and on torch.randn inputs, times each against torch eager in the same run (CUDA
events, warm-up, L2 flush, median) and prints a table. Exits 1 if any variant is wrong.

    python examples/linear_relu_div.py                      # KernelBench shapes, fp32
    python examples/linear_relu_div.py --dtype bfloat16 --batch-size 256
"""

import argparse
import sys

import torch

from cupy_ops.bench import gpu_problem, kernelbench
from cupy_ops.models import linear_relu_div as problem


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-size", type=int, default=problem.batch_size, help="rows of x (default %(default)s)")
    p.add_argument("--in-features", type=int, default=problem.in_features, help="default %(default)s")
    p.add_argument("--out-features", type=int, default=problem.out_features, help="default %(default)s")
    p.add_argument("--divisor", type=float, default=problem.divisor, help="default %(default)s")
    kernelbench.add_run_options(p)
    args = p.parse_args()

    problem_text = gpu_problem()
    if problem_text:
        print(problem_text, file=sys.stderr)
        return 1
    dtype = kernelbench.DTYPES[args.dtype]
    init = [args.in_features, args.out_features, args.divisor]

    def make_inputs(fill, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return [fill(args.batch_size, args.in_features, device="cuda", generator=g).to(dtype)]

    variants = {
        "ModelNew (one fused kernel on Hopper, else cuBLAS + relu_div)": problem.ModelNew,
        "ModelNewCublas (cuBLAS + fused relu_div)": problem.ModelNewCublas,
        "ModelNewNaive (naive fused kernel)": problem.ModelNewNaive,
    }
    print(
        f"linear_relu_div: x ({args.batch_size}, {args.in_features}) -> Linear({args.in_features}, "
        f"{args.out_features}) -> relu -> / {args.divisor}; {args.dtype}; {torch.cuda.get_device_name()}",
        flush=True,
    )
    results = kernelbench.run(
        problem,
        variants,
        make_inputs=make_inputs,
        init_inputs=init,
        dtype=dtype,
        trials=args.trials,
        runs=args.runs,
        max_seconds=args.max_seconds,
    )
    return kernelbench.report(results)


if __name__ == "__main__":
    sys.exit(main())
