"""Your own CUDA kernel with cupy_ops.Kernel: no compiler to install, no build step.

A fused "leaky ReLU then scale" kernel, written in CUDA C, compiled by NVRTC on first call
(cached afterwards), launched on torch tensors on torch's current stream, and checked
against the torch expression. It is compiled with ``-lineinfo`` (profilers then show its
source lines; NVRTC options pass through ``options=``). Without a GPU, ``--arch`` compiles it
for that architecture instead (``Kernel.compile_offline``: NVRTC on the CPU) and prints its
registers and spills; ``--ptx DIR`` also writes its PTX there (``Kernel.ptx``).

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
from cupy_ops.bench import gpu_problem, time_cuda

SOURCE = r"""
template <class T>   // instantiated for float, f16, bf16 and double; x's dtype picks one
__global__ void leaky_scale(const T* x, T* y, float slope, float scale, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = to_float(x[i]);                        // exact conversions from common.cuh
    y[i] = from_float<T>((v > 0.f ? v : v * slope) * scale);
  }
}
"""


def arch(value: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}a?", value):
        raise argparse.ArgumentTypeError(f"--arch must look like sm_80 or sm_90, got {value!r}")
    return value


def kernel() -> cupy_ops.Kernel:
    return cupy_ops.Kernel(SOURCE, "leaky_scale", options=["-lineinfo"])


def compile_only(arch: str, ptx_dir: str | None) -> int:
    """Compile every instantiation of the kernel for ``arch`` with NVRTC, no GPU involved."""
    try:
        results = kernel().compile_offline(arch)
    except ImportError as exc:   # no CuPy, hence no NVRTC
        print(exc, file=sys.stderr)
        return 2
    for r in results:
        report = (f"{r.registers} registers, spill stores/loads {r.spill_stores}/{r.spill_loads} bytes" if r.ok
                  else "FAILED:\n" + r.log.strip())
        print(f"{r.expr:<22} {r.arch}: {report}")
    if ptx_dir and all(r.ok for r in results):
        path = Path(ptx_dir) / f"leaky_scale.{arch}.ptx"
        path.write_text(kernel().ptx(arch))    # every instantiation, one .entry each
        print(f"wrote {path}", file=sys.stderr)
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
    problem = gpu_problem("`python examples/my_kernel.py --arch sm_90` compiles this kernel and reports its "
                          "registers and spills (Kernel.compile_offline)")
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
    print(f"leaky_scale on {tuple(x.shape)} bf16: {ms:.4f} ms (torch leaky_relu * 2: {ref_ms:.4f} ms); "
          f"matches torch: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
