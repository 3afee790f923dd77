"""KernelBench level1/19: ReLU on (4096, 393216) with cupy_ops vs torch.

The full size needs about 20 GB of GPU memory (input, two outputs, L2-flush buffer); on a
smaller GPU the batch is scaled down to fit, and the script says so.

    python examples/relu.py
    python examples/relu.py --batch-size 1024 --dtype bfloat16
"""

import argparse
import sys

import torch

from cupy_ops.bench import gpu_problem, kernelbench
from cupy_ops.models import relu as problem


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-size", type=int, default=problem.batch_size, help="default %(default)s")
    p.add_argument("--dim", type=int, default=problem.dim, help="default %(default)s")
    kernelbench.add_run_options(p)
    args = p.parse_args()
    problem_text = gpu_problem()
    if problem_text:
        print(problem_text, file=sys.stderr)
        return 1
    dtype = kernelbench.DTYPES[args.dtype]
    itemsize = torch.empty((), dtype=dtype).element_size()
    free, _ = torch.cuda.mem_get_info()
    # Live at once: the input, torch's output, ours, and 256 MB of L2 flush; keep 10% slack.
    row_bytes = 3 * args.dim * itemsize
    fits = int((free * 0.9 - 256 * 2**20) // row_bytes)
    batch = args.batch_size
    if fits < batch:
        batch = max(1, fits)
        print(
            f"note: ({args.batch_size}, {args.dim}) needs {args.batch_size * row_bytes / 1e9:.1f} GB but "
            f"{free / 1e9:.1f} GB is free; scaled the batch down to {batch}",
            flush=True,
        )

    def make_inputs(fill, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return [fill(batch, args.dim, device="cuda", generator=g, dtype=dtype)]

    print(f"relu: x ({batch}, {args.dim}); {args.dtype}; {torch.cuda.get_device_name()}", flush=True)
    results = kernelbench.run(
        problem,
        {"ModelNew (cupy_ops.relu)": problem.ModelNew},
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
