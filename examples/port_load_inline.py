"""From a torch.utils.cpp_extension.load_inline extension to cupy_ops, with its CUDA string unchanged.

CUDA_SOURCES below is what a load_inline extension holds: torch's headers, a kernel, a C++
wrapper taking torch::Tensor that launches it with <<<...>>>, and a PYBIND11_MODULE block.
``cupy_ops.load_inline_kernels`` sets the host side aside (and says what it set aside) and
compiles the kernel with NVRTC: no nvcc, no ninja, no host compiler. The wrapper becomes a few
lines of Python, here a torch op (``cupy_ops.op``), and ``ModelNew`` calls it; it is checked side
by side with ``Model`` on ``torch.randn`` inputs at KernelBench's tolerance (docs/porting.md).

    python examples/port_load_inline.py
    python examples/port_load_inline.py --arch sm_90      # no GPU needed: compile only
"""

import argparse
import re
import sys

import torch
import torch.nn as nn

import cupy_ops
from cupy_ops.bench import gpu_problem, time_cuda

# The string given to load_inline(cuda_sources=...), as written for it.
CUDA_SOURCES = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

__global__ void scale_shift_relu(const float* __restrict__ x, const float* __restrict__ shift, float* y,
                                 float scale, long long n, int cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;   // 64-bit: n may pass 2^31
  if (i < n) y[i] = fmaxf(x[i] * scale + shift[i % cols], 0.0f);
}

torch::Tensor scale_shift_relu_cuda(torch::Tensor x, torch::Tensor shift, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
  auto y = torch::empty_like(x);
  const long long n = x.numel();
  const int block = 256;
  scale_shift_relu<<<(n + block - 1) / block, block, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), shift.data_ptr<float>(), y.data_ptr<float>(), (float)scale, n, (int)shift.numel());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale_shift_relu", &scale_shift_relu_cuda, "relu(x * scale + shift)");
}
"""
kernels = cupy_ops.load_inline_kernels(CUDA_SOURCES)


# --- the port: the C++ wrapper above, in Python ----------------------------------------------------
@cupy_ops.op("port_example::scale_shift_relu", output=cupy_ops.like("x"))
def scale_shift_relu(x: torch.Tensor, shift: torch.Tensor, scale: float, *, out: torch.Tensor) -> None:
    """``torch.relu(x * scale + shift)``: x (..., C) float32, shift (C,)."""
    n = x.numel()
    kernels.scale_shift_relu(x, shift, out, scale, n, shift.numel(), grid=cupy_ops.cdiv(n, 256), block=256)


class Model(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(features))
        self.scale = scale

    def forward(self, x):
        return torch.relu(x * self.scale + self.shift)


class ModelNew(Model):  # the same parameters, made in the same order: the same seed, the same weights
    def forward(self, x):
        return scale_shift_relu(x.contiguous(), self.shift, self.scale)


# ---------------------------------------------------------------------------------------------------


def arch(value: str) -> str:
    if not re.fullmatch(r"sm_\d{2,3}a?", value):
        raise argparse.ArgumentTypeError(f"--arch must look like sm_80 or sm_90, got {value!r}")
    return value


def compile_only(target: str) -> int:
    print(kernels)
    ok = True
    for name, results in kernels.compile_offline(target).items():
        for r in results:
            ok &= r.ok
            print(
                f"{name} for {r.arch}: "
                + (f"{r.registers} registers, {r.spill_stores} bytes spilled" if r.ok else "failed\n" + r.log.strip())
            )
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", type=arch, help="compile only, for this architecture (e.g. sm_90): no GPU needed")
    p.add_argument("--rows", type=int, default=4096, help="rows of x (default %(default)s)")
    p.add_argument("--features", type=int, default=8192, help="columns of x (default %(default)s)")
    args = p.parse_args()
    if args.arch:
        return compile_only(args.arch)
    problem = gpu_problem(
        "`python examples/port_load_inline.py --arch sm_90` compiles its kernel from the "
        "load_inline source and reports its registers (compile_offline)"
    )
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print(kernels)
    init = [args.features, 2.0]
    torch.manual_seed(42)
    model = Model(*init).cuda()
    torch.manual_seed(42)
    model_new = ModelNew(*init).cuda()
    ok = True
    with torch.no_grad():  # as KernelBench checks: the op has no backward rule
        for trial in range(5):
            x = torch.randn(args.rows, args.features, device="cuda")
            err = (model_new(x) - model(x)).abs().max().item()
            ok &= torch.allclose(model_new(x), model(x), atol=1e-4, rtol=1e-4)
            print(f"trial {trial}: max |ModelNew - Model| = {err:.3g}")
        x = torch.randn(args.rows, args.features, device="cuda")
        ms, ref_ms = time_cuda(lambda: model_new(x)).median, time_cuda(lambda: model(x)).median
    print(
        f"ModelNew {ms:.4f} ms, Model (torch eager) {ref_ms:.4f} ms on {tuple(x.shape)} float32; "
        f"matches Model at atol = rtol = 1e-4: {'yes' if ok else 'NO'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
