"""KernelBench level1/1: square matmul (N = 4096) with the cupy_ops kernel vs torch.

python examples/matmul.py                 # N = 4096, fp32 (the naive kernel takes seconds)
python examples/matmul.py --n 1024 --dtype float16
"""

import argparse
import sys

import torch

from cupy_ops.bench import gpu_problem, kernelbench
from cupy_ops.models import matmul as problem


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=problem.N, help="matrix size N (default %(default)s)")
    kernelbench.add_run_options(p)
    args = p.parse_args()
    problem_text = gpu_problem()
    if problem_text:
        print(problem_text, file=sys.stderr)
        return 1
    dtype = kernelbench.DTYPES[args.dtype]

    def make_inputs(fill, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return [fill(args.n, args.n, device="cuda", generator=g).to(dtype) for _ in range(2)]

    print(
        f"matmul: ({args.n}, {args.n}) @ ({args.n}, {args.n}); {args.dtype}; {torch.cuda.get_device_name()}", flush=True
    )
    variants = {
        "ModelNew (fp16x3 or tf32x3 on Hopper fp32, else auto)": problem.ModelNew,
        "ModelNew('auto')": lambda: problem.ModelNew("auto"),
        "ModelNew('naive')": lambda: problem.ModelNew("naive"),
    }
    results = kernelbench.run(
        problem,
        variants,
        make_inputs=make_inputs,
        init_inputs=[],
        dtype=dtype,
        trials=args.trials,
        runs=args.runs,
        max_seconds=args.max_seconds,
    )
    return kernelbench.report(results)


if __name__ == "__main__":
    sys.exit(main())
