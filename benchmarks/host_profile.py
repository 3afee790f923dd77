"""Experiment (GPU): where the host time of one eager call goes (cProfile over many calls of a
small problem, the GPU idle), for the GEMM ops and relu_div.

    python benchmarks/host_profile.py [matmul|linear|relu_div] [dtype] [algo] [n]

(``algo``: the GEMM ops' algo argument, "auto" unless given: e.g. float32 fp16x3.)
"""

import cProfile
import pstats
import sys
import time

import torch

import cupy_ops

what = sys.argv[1] if len(sys.argv) > 1 else "matmul"
dtype = getattr(torch, sys.argv[2] if len(sys.argv) > 2 else "bfloat16")
algo = sys.argv[3] if len(sys.argv) > 3 else "auto"
size = int(sys.argv[4]) if len(sys.argv) > 4 else 1024  # matmul's n (n x n x n)
torch.manual_seed(0)
if what == "matmul":
    a, b = torch.randn(size, size, device="cuda", dtype=dtype), torch.randn(size, size, device="cuda", dtype=dtype)
    fn = lambda: cupy_ops.matmul(a, b, algo=algo)  # noqa: E731
elif what == "linear":
    x, w = torch.randn(256, 1024, device="cuda", dtype=dtype), torch.randn(1024, 1024, device="cuda", dtype=dtype)
    bias = torch.randn(1024, device="cuda", dtype=dtype)
    fn = lambda: cupy_ops.linear_relu_div(x, w, bias, 2.0, algo=algo)  # noqa: E731
else:
    x = torch.randn(4096, device="cuda", dtype=dtype)
    fn = lambda: cupy_ops.relu_div(x, 2.0)  # noqa: E731
for _ in range(50):
    fn()
torch.cuda.synchronize()
n = 2000
t0 = time.perf_counter()
for _ in range(n):
    fn()
torch.cuda.synchronize()
print(
    f"{what} {dtype} algo={algo} n={size}: {(time.perf_counter() - t0) / n * 1e6:.1f} us per call "
    "(wall, incl. GPU if slower)"
)
prof = cProfile.Profile()
prof.enable()
for _ in range(n):
    fn()
prof.disable()
torch.cuda.synchronize()
pstats.Stats(prof).sort_stats("tottime").print_stats(14)
