"""Your own CUDA kernel with cupy_ops.Kernel: no compiler to install, no build step.

A fused "leaky ReLU then scale" kernel, written in CUDA C, compiled by NVRTC on first call
(cached afterwards), launched on torch tensors on torch's current stream, and checked
against the torch expression. It is compiled with ``-lineinfo`` (profilers then show its
source lines; NVRTC options pass through ``options=``) and ``-DITEMS=1`` (``defines=``: the
elements each thread handles). Then: a launch on a side stream (``stream=``), the driver's
occupancy for it (``Kernel.occupancy``), and ``cupy_ops.autotune`` choosing the block size and
ITEMS (kept on disk: a second run of this script does not time again).

Without a GPU, ``--arch`` compiles it for that architecture instead (``Kernel.compile_offline``:
NVRTC on the CPU) and prints its registers and spills, then what autotuning would prune
before timing (``Autotuned.check``); ``--ptx DIR`` also writes its PTX there (``Kernel.ptx``).

    python examples/my_kernel.py
    python examples/my_kernel.py --arch sm_90      # no GPU needed
    python examples/my_kernel.py --arch sm_90 --ptx .
"""

import argparse
import re
import sys
import time
from pathlib import Path

import torch

import cupy_ops
import cupy_ops.autotuning
from cupy_ops.bench import gpu_problem, time_cuda

SOURCE = r"""
template <class T>   // instantiated for float, f16, bf16 and double; x's dtype picks one
__global__ void leaky_scale(const T* x, T* y, float slope, float scale, long long n) {
  long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) * ITEMS;   // ITEMS: a -D define
  float v[ITEMS];                                    // every load in flight before any store
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) v[j] = i + j < n ? to_float(x[i + j]) : 0.f;   // exact (common.cuh)
#pragma unroll
  for (int j = 0; j < ITEMS; ++j)
    if (i + j < n) y[i + j] = from_float<T>((v[j] > 0.f ? v[j] : v[j] * slope) * scale);
}
"""
# What autotune tries: every block size with every ITEMS, plus one that spills registers
# (-maxrregcount=16 cannot hold 32 values in flight) and is pruned untimed.
CONFIGS = cupy_ops.configs(block=[128, 256, 512], ITEMS=[1, 2, 4]) + [
    cupy_ops.Config(block=256, defines={"ITEMS": 32}, options=["-maxrregcount=16"])
]


def arch(value: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}a?", value):
        raise argparse.ArgumentTypeError(f"--arch must look like sm_80 or sm_90, got {value!r}")
    return value


def kernel() -> cupy_ops.Kernel:
    return cupy_ops.Kernel(SOURCE, "leaky_scale", options=["-lineinfo"], defines={"ITEMS": 1})


def tuned() -> cupy_ops.Autotuned:
    """leaky_scale tuned per shape key over CONFIGS; its grid follows each configuration."""
    return cupy_ops.autotune(
        SOURCE,
        "leaky_scale",
        CONFIGS,
        options=["-lineinfo"],
        grid=lambda cfg, x, y, slope, scale, n: cupy_ops.cdiv(n, cfg.threads * cfg["ITEMS"]),
    )


def compile_only(arch: str, ptx_dir: str | None) -> int:
    """Compile every instantiation of the kernel for ``arch`` with NVRTC, no GPU involved."""
    try:
        results = kernel().compile_offline(arch)
    except ImportError as exc:  # no CuPy, hence no NVRTC
        print(exc, file=sys.stderr)
        return 2
    for r in results:
        report = (
            f"{r.registers} registers, spill stores/loads {r.spill_stores}/{r.spill_loads} bytes"
            if r.ok
            else "FAILED:\n" + r.log.strip()
        )
        print(f"{r.expr:<22} {r.arch}: {report}")
    if ptx_dir and all(r.ok for r in results):
        path = Path(ptx_dir) / f"leaky_scale.{arch}.ptx"
        path.write_text(kernel().ptx(arch))  # every instantiation, one .entry each
        print(f"wrote {path}", file=sys.stderr)
    print(f"autotune's configurations for {arch} (bfloat16), pruned before any timing:")
    print(cupy_ops.autotuning.table(tuned().check(arch, torch.bfloat16)))
    return 0 if all(r.ok for r in results) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", type=arch, help="compile only, for this architecture (e.g. sm_90): no GPU needed")
    p.add_argument("--ptx", metavar="DIR", help="with --arch: also write the kernel's PTX into DIR")
    args = p.parse_args()
    if args.ptx and not args.arch:
        p.error("--ptx needs --arch")
    if args.arch:
        return compile_only(args.arch, args.ptx)
    problem = gpu_problem(
        "`python examples/my_kernel.py --arch sm_90` compiles this kernel and reports its "
        "registers and spills (Kernel.compile_offline)"
    )
    if problem:
        print(problem, file=sys.stderr)
        return 1
    leaky_scale = kernel()
    print("parameters read from the source:", ", ".join(f"{n} ({k})" for k, n, _ in leaky_scale.params))
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    n = x.numel()
    t0 = time.perf_counter()
    leaky_scale(x, y, 0.1, 2.0, n, grid=cupy_ops.cdiv(n, 256), block=256)
    torch.cuda.synchronize()
    print(f"first call (compile or disk-cache load + launch): {1e3 * (time.perf_counter() - t0):.1f} ms")
    expected = (torch.nn.functional.leaky_relu(x.float(), 0.1) * 2.0).to(x.dtype)
    ok = torch.equal(y, expected)
    ms = time_cuda(lambda: leaky_scale(x, y, 0.1, 2.0, n, grid=cupy_ops.cdiv(n, 256), block=256)).median
    ref_ms = time_cuda(lambda: torch.nn.functional.leaky_relu(x, 0.1) * 2.0).median
    print(
        f"leaky_scale on {tuple(x.shape)} bf16: {ms:.4f} ms (torch leaky_relu * 2: {ref_ms:.4f} ms); "
        f"matches torch: {'yes' if ok else 'NO'}"
    )

    side = torch.cuda.Stream()  # launch modes: another stream (also cluster=, cooperative=)
    side.wait_stream(torch.cuda.current_stream())
    z = torch.empty_like(x)
    leaky_scale(x, z, 0.1, 2.0, n, grid=cupy_ops.cdiv(n, 256), block=256, stream=side)
    side.synchronize()
    ok &= torch.equal(z, expected)
    occ = leaky_scale.occupancy(256, dtype=x.dtype)
    print(
        f"occupancy with blocks of 256: {occ.blocks_per_sm} blocks per SM ({occ.occupancy:.0%}), "
        f"suggested block {occ.suggested_block}; the side stream's result matches: {torch.equal(z, expected)}"
    )

    fast = tuned()  # the first call per shape tunes (or reads the disk cache)
    w = torch.empty_like(x)
    fast(x, w, 0.1, 2.0, n)
    ok &= torch.equal(w, expected)
    print(fast.report(x, w, 0.1, 2.0, n))
    tuned_ms = time_cuda(lambda: fast(x, w, 0.1, 2.0, n)).median
    print(f"autotuned leaky_scale: {tuned_ms:.4f} ms; matches torch: {'yes' if torch.equal(w, expected) else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
