"""``python -m cupy_ops.bench.first_call``: what the first call of each built-in op costs.

Each op runs in a fresh process twice: with an empty kernel cache (``CUPY_CACHE_DIR`` a new
folder: every variant the call launches is compiled by NVRTC) and again with the cache that
run left (a new process, a warm disk cache). The time is from just before the first call
(CUDA context and inputs ready, ``import cupy_ops`` done; CuPy is imported by the call) to its
result on the host; the result is checked against torch. Shapes are KernelBench's.

``--peers`` adds one ReLU kernel built both ways in fresh processes with empty caches:
``torch.utils.cpp_extension.load_inline`` (host compiler, nvcc, ninja: what cupy_ops replaces)
and ``cupy_ops.Kernel`` (NVRTC), each to its first result. ``--results PATH`` appends every
figure to a benchmark results file (the problem ``"first_call"``, the op as the shape).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

# (op, dtype, TF32 allowed, code building the inputs and both results: `ours` and `ref`)
CASES = [
    ("relu", "float32", False, "x = torch.randn(1024, 8192, device='cuda')", "cupy_ops.relu(x)", "torch.relu(x)"),
    (
        "relu_div",
        "float32",
        False,
        "x = torch.randn(1024, 8192, device='cuda')",
        "cupy_ops.relu_div(x, 2.0)",
        "torch.relu(x) / 2.0",
    ),
    (
        "relu_div",
        "bfloat16",
        False,
        "x = torch.randn(1024, 8192, device='cuda', dtype=torch.bfloat16)",
        "cupy_ops.relu_div(x, 2.0)",
        "torch.relu(x) / 2.0",
    ),
    (
        "matmul",
        "float32",
        False,
        "a = torch.rand(4096, 4096, device='cuda'); b = torch.rand(4096, 4096, device='cuda')",
        "cupy_ops.matmul(a, b)",
        "a @ b",
    ),
    (
        "matmul",
        "tf32",
        True,
        "a = torch.rand(4096, 4096, device='cuda'); b = torch.rand(4096, 4096, device='cuda')",
        "cupy_ops.matmul(a, b)",
        "a @ b",
    ),
    (
        "matmul",
        "bfloat16",
        False,
        "a = torch.rand(4096, 4096, device='cuda', dtype=torch.bfloat16); "
        "b = torch.rand(4096, 4096, device='cuda', dtype=torch.bfloat16)",
        "cupy_ops.matmul(a, b)",
        "a @ b",
    ),
    (
        "linear_relu_div",
        "float32",
        False,
        "x = torch.rand(1024, 8192, device='cuda'); "
        "w = torch.rand(8192, 8192, device='cuda') / 100; bias = torch.rand(8192, device='cuda')",
        "cupy_ops.linear_relu_div(x, w, bias, 2.0)",
        "torch.relu(F.linear(x, w, bias)) / 2.0",
    ),
    (
        "linear_relu_div",
        "bfloat16",
        False,
        "x = torch.rand(1024, 8192, device='cuda', dtype=torch.bfloat16); "
        "w = (torch.rand(8192, 8192, device='cuda') / 100).bfloat16(); "
        "bias = torch.rand(8192, device='cuda', dtype=torch.bfloat16)",
        "cupy_ops.linear_relu_div(x, w, bias, 2.0)",
        "torch.relu(F.linear(x, w, bias)) / 2.0",
    ),
]

CHILD = """
import json, time, torch, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = {tf32}
{setup}
torch.cuda.synchronize()
import cupy_ops
from cupy_ops.compiler import build
t0 = time.perf_counter()
ours = {ours}
torch.cuda.synchronize()
first = time.perf_counter() - t0
t0 = time.perf_counter()
ours = {ours}
torch.cuda.synchronize()
second = time.perf_counter() - t0
ref = {ref}
tol = 1e-2 if ours.dtype != torch.float32 or {tf32} else 1e-4
print(json.dumps({{"first_s": first, "second_s": second, "correct": bool(torch.allclose(ours, ref, atol=tol, rtol=tol)),
                  "compiled": sorted(v.expr for v, arch in build._binaries),
                  "from_disk": sum(b.cached for b in build._binaries.values())}}))
"""


# The same ReLU both ways (--peers): the figure is the build, to the first result on the host.
RELU_CUDA = r"""
__global__ void relu_f32(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
PEERS = {
    "load_inline": RELU_CUDA
    + r"""
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long long n = x.numel();
  relu_f32<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
""",
    "cupy_ops.Kernel": RELU_CUDA,
}
PEER_CHILD = """
import json, os, time, torch
x = torch.randn(1024, 8192, device='cuda'); torch.cuda.synchronize()
t0 = time.perf_counter()
if {load_inline}:
    from torch.utils.cpp_extension import load_inline
    m = load_inline("relu_first_call", cpp_sources="torch::Tensor relu(torch::Tensor x);", cuda_sources={source!r},
                    functions=["relu"], build_directory=os.environ["BUILD_DIR"])
    y = m.relu(x)
else:
    import cupy_ops
    y = torch.empty_like(x)
    cupy_ops.Kernel({source!r}, "relu_f32")(x, y, x.numel(), grid=(x.numel() + 255) // 256, block=256)
torch.cuda.synchronize()
print(json.dumps({{"first_s": time.perf_counter() - t0, "correct": bool(torch.equal(y, torch.relu(x)))}}))
"""


def measure_peer(name: str, folder: str) -> dict:
    """``name``'s ReLU built in a fresh process with empty caches under ``folder``: ``{"first_s",
    "correct"}``, or ``{"error"}`` where that way cannot build here (no nvcc, say)."""
    code = PEER_CHILD.format(load_inline=name == "load_inline", source=PEERS[name])
    env = dict(
        os.environ,
        CUPY_CACHE_DIR=os.path.join(folder, "cupy"),
        BUILD_DIR=folder,
        TORCH_EXTENSIONS_DIR=os.path.join(folder, "torch_extensions"),
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1][-300:] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(case, cache_dir: str) -> dict:
    op, dtype, tf32, setup, ours, ref = case
    code = CHILD.format(tf32=tf32, setup=setup, ours=ours, ref=ref)
    env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{op} {dtype}: the child process failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m cupy_ops.bench.first_call",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", metavar="PATH", help="write the figures (and the environment) as JSON")
    p.add_argument("--results", metavar="PATH", help="append the figures to a benchmark results file (JSON lines)")
    p.add_argument(
        "--peers",
        action="store_true",
        help="also build one ReLU with torch's load_inline and with cupy_ops.Kernel, empty caches",
    )
    args = p.parse_args(argv)
    from .timing import gpu_problem

    problem = gpu_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    from .env import describe, environment

    env = environment()
    print(f"first call of each op in a fresh process; {describe(env)}", flush=True)
    rows = []
    head = (
        f"{'op':<16} {'dtype':<9} {'empty cache s':>13} {'warm cache s':>12} {'2nd call ms':>11}  ok   kernels compiled"
    )
    print(head + "\n" + "-" * len(head))
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="cupy_ops_first_call_") as cache_dir:
            cold = measure(case, cache_dir)
            warm = measure(case, cache_dir)
        row = {
            "op": case[0],
            "dtype": case[1],
            "cold_s": cold["first_s"],
            "warm_s": warm["first_s"],
            "second_ms": cold["second_s"] * 1e3,
            "correct": cold["correct"] and warm["correct"],
            "compiled": cold["compiled"],
            "warm_from_disk": warm["from_disk"],
        }
        rows.append(row)
        print(
            f"{row['op']:<16} {row['dtype']:<9} {row['cold_s']:>13.3f} {row['warm_s']:>12.3f} "
            f"{row['second_ms']:>11.2f}  {'yes' if row['correct'] else 'NO':<4} {', '.join(row['compiled'])}",
            flush=True,
        )
    peers = {}
    if args.peers:
        print("\none ReLU kernel (float32, 1024 x 8192), built in a fresh process with empty caches:")
        for name in PEERS:
            with tempfile.TemporaryDirectory(prefix="cupy_ops_peer_") as folder:
                peers[name] = got = measure_peer(name, folder)
            print(
                f"  {name:<16} "
                + (
                    f"{got['first_s']:8.3f} s  {'correct' if got['correct'] else 'WRONG'}"
                    if "first_s" in got
                    else f"not measured: {got['error']}"
                ),
                flush=True,
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"environment": env, "rows": rows, "peers": peers}, f, indent=1)
    if args.results:
        from .results import FIRST_CALL, append, record

        states = (("cupy_ops empty cache", "cold_s"), ("cupy_ops warm cache", "warm_s"))
        recs = [
            record(env, FIRST_CALL, r["dtype"], r["op"], variant, r[key] * 1e3, error=None if r["correct"] else "wrong")
            for r in rows
            for variant, key in states
        ]
        recs += [
            record(
                env,
                FIRST_CALL,
                "float32",
                "relu kernel build",
                name,
                got.get("first_s", 0) * 1e3 or None,
                error=got.get("error") or (None if got["correct"] else "wrong"),
            )
            for name, got in peers.items()
        ]
        append(args.results, recs)
    return 0 if all(r["correct"] for r in rows) and all(g.get("correct", True) for g in peers.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
