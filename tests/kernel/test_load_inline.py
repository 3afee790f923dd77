"""load_inline sources as written (CPU): the host side set aside and said, line numbers kept,
every kernel of the five seed answers compiled offline from its load_inline string unchanged.

The seeds (LLM answers to KernelBench prompts, each with Python code passing a CUDA string to
``load_inline``) are read from ``$CUPY_OPS_SEEDS``, else ``<repo>/../shared/seeds``, else
``<repo>/.seeds``; the tests that need them skip, saying where they looked, when none is there.
"""

import re

import pytest

import cupy_ops
from cupy_ops.kernel import load_inline
from cupy_ops.kernel.load_inline import SetAside, split

from load_inline_seeds import SEEDS, seed_sources


def needs_nvrtc():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


# A load_inline source with every construct of the host side and of the device side.
CRAFTED = r"""#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "c10/cuda/CUDAGuard.h"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <vector>
#include <cmath>
/* #include <torch/types.h> in a comment is no include */
using namespace torch;
namespace py = pybind11;
#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }
__constant__ float c_scale[4];
struct Pair { float lo, hi; };
template <typename T>
__device__ __forceinline__ T clamp0(T v) { return v > T(0) ? v : T(0); }
__host__ __device__ inline float square(float v) { return v * v; }
int blocks_for(int n) { return cdiv(n, 256); }
namespace ops {
__global__ void relu(const float* __restrict__ x, float* y, long long n) {
  __shared__ float tile[cdiv(512, 2)];
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { tile[threadIdx.x] = clamp0(x[i]) * c_scale[0]; y[i] = tile[threadIdx.x]; }
}
template <typename scalar_t>
void launch_relu(const scalar_t* x, scalar_t* y, long long n, cudaStream_t s) {
  relu<<<blocks_for(n), 256, 0, s>>>(x, y, n);
}
}  // namespace ops
extern "C" __global__ void halve(__half* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __float2half(__half2float(x[i]) * 0.5f);
}
torch::Tensor relu_forward(torch::Tensor x);
torch::Tensor relu_forward(torch::Tensor x) {
  CHECK_CUDA(x);
  auto y = torch::empty_like(x);
#ifdef WITH_STREAM
  auto stream = at::cuda::getCurrentCUDAStream();
#endif
  ops::launch_relu(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), 0);
  return y;
}
std::vector<at::Tensor> both(const at::Tensor& a) { return {a, a}; }
TORCH_LIBRARY(my_ops, m) { m.def("relu_forward(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(my_ops, CUDA, m) { m.impl("relu_forward", &relu_forward); }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("relu_forward", &relu_forward, "ReLU (CUDA)");
}
"""
STAND_IN = "; <load_inline_std.h> in its place"
CRAFTED_ASIDE = [
    (1, 1, "#include <torch/extension.h> (torch's header, for the host code)" + STAND_IN),
    (2, 2, "#include <ATen/cuda/CUDAContext.h> (torch's header, for the host code)" + STAND_IN),
    (3, 3, '#include "c10/cuda/CUDAGuard.h" (torch\'s header, for the host code)' + STAND_IN),
    (6, 6, "#include <vector> (C/C++ standard library: NVRTC has none)" + STAND_IN),
    (7, 7, "#include <cmath> (C/C++ standard library: NVRTC has none)" + STAND_IN),
    (9, 9, "using namespace torch ; (names torch)"),
    (10, 10, "namespace py = pybind11 ; (names torch)"),
    (18, 18, "host function blocks_for"),
    (25, 28, "host function launch_relu (launches a kernel with <<<...>>>)"),
    (34, 34, "host function relu_forward (torch's types in its signature)"),
    (35, 43, "host function relu_forward (torch's types in its signature)"),
    (44, 44, "host function both (torch's types in its signature)"),
    (45, 45, "TORCH_LIBRARY block"),
    (46, 46, "TORCH_LIBRARY_IMPL block"),
    (47, 49, "PYBIND11_MODULE block"),
]


def test_the_host_side_is_set_aside_and_said():
    parts = split(CRAFTED)
    assert [(s.line, s.last, s.what) for s in parts.set_aside] == CRAFTED_ASIDE
    assert parts.kernels == ("ops::relu", "halve")
    assert "line 1: #include <torch/extension.h>" in str(parts)
    assert "lines 47-49: PYBIND11_MODULE block" in str(parts)
    assert str(SetAside("host function f", 3, 3)) == "line 3: host function f"


def test_set_aside_lines_are_blanked_and_every_other_line_kept_as_written():
    parts = split(CRAFTED)
    before, after = CRAFTED.split("\n"), parts.source.split("\n")
    assert len(after) == len(before)
    aside = {n for first, last, _ in CRAFTED_ASIDE for n in range(first, last + 1)}
    for n, (old, new) in enumerate(zip(before, after), 1):
        if n in (38, 40):  # a conditional in a host function stays: its partner may be outside it
            assert new == old, n
        elif n in (1, 2, 3, 6, 7):  # an include set aside: cupy_ops' stand-in on its line
            assert new.rstrip() == "#include <load_inline_std.h>", (n, new)
        elif n in aside:
            assert not new.strip() and len(new) == len(old), (n, new)
        else:
            assert new == old, (n, new)


def test_device_code_is_kept_whatever_it_names():
    src = """#include "my_device_code.cuh"
__device__ float from_half(at::Half h);
template <class T> struct Functor { __device__ T operator()(T v) const { return v; } };
struct Host { int n; };
__global__ void k(float* y) { y[0] = 1.f; }
"""
    parts = split(src)
    assert parts.set_aside == () and parts.source == src and parts.kernels == ("k",)


def test_a_macro_standing_for_an_execution_space_marks_device_code():
    src = """#define HD __host__ __device__
#define DEVICE_FN(type) __device__ type
HD inline float square(float v) { return v * v; }
DEVICE_FN(float) cube(float v) { return v * v * v; }
int host_only(int a) { return a; }
__global__ void k(float* y) { y[0] = square(1.f) + cube(2.f); }
"""
    assert [str(s) for s in split(src).set_aside] == ["line 5: host function host_only"]


def test_an_include_in_a_string_or_a_comment_is_none():
    src = 'const char* text = R"(\n#include <torch/extension.h>\n)";\n// #include <vector>\n__global__ void k() {}\n'
    assert split(src).set_aside == ()


def test_a_host_function_without_torch_or_a_launch_is_set_aside_a_constexpr_one_kept():
    parts = split(
        "constexpr int tile() { return 32; }\ninline int grid(int n) { return n / tile(); }\n"
        "__global__ void k(float* y) { y[0] = tile(); }\n"
    )
    assert [str(s) for s in parts.set_aside] == ["line 2: host function grid"]


def test_load_inline_sources_given_as_a_list_are_joined_as_load_inline_joins_them():
    parts = split(["#include <torch/extension.h>", "__global__ void k(float* y) { y[0] = 1.f; }"])
    assert parts.kernels == ("k",) and [s.line for s in parts.set_aside] == [1]


def test_errors_name_the_argument():
    with pytest.raises(TypeError, match="cuda_sources must be CUDA code"):
        split(42)
    with pytest.raises(TypeError, match="cuda_sources must be CUDA code"):
        cupy_ops.load_inline_kernels([b"__global__ void k() {}"])
    with pytest.raises(ValueError, match=r"(?s)cuda_sources: no __global__ kernel .* host function f"):
        cupy_ops.load_inline_kernels("#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x; }")
    with pytest.raises(ValueError, match="not an NVRTC option"):
        cupy_ops.load_inline_kernels(CRAFTED, options=["--no-such-option"])
    kernels = cupy_ops.load_inline_kernels(CRAFTED)
    with pytest.raises(
        KeyError, match="no __global__ kernel 'relu_forward' in the load_inline source; its kernels: ops::relu, halve"
    ):
        kernels["relu_forward"]
    with pytest.raises(AttributeError, match="no __global__ kernel 'nope'"):
        kernels.nope  # noqa: B018


def test_kernels_by_name_with_what_was_set_aside():
    kernels = cupy_ops.load_inline_kernels(CRAFTED, options=["-lineinfo"])
    assert list(kernels) == ["ops::relu", "halve"] and len(kernels) == 2 and "halve" in kernels
    assert kernels.halve is kernels["halve"] and isinstance(kernels["ops::relu"], cupy_ops.Kernel)
    assert [k for k, _, _ in kernels.halve.params] == ["ptr", "i32"]
    assert kernels.set_aside == split(CRAFTED).set_aside and kernels.source == split(CRAFTED).source
    text = str(kernels)
    assert text.startswith("load_inline source: 2 kernel(s): ops::relu (line 20), halve (line 30)\nset aside:")
    assert "\n  lines 35-43: host function relu_forward (torch's types in its signature)" in text


def test_every_kernel_of_a_load_inline_source_compiles():
    needs_nvrtc()
    results = cupy_ops.load_inline_kernels(CRAFTED).compile_offline("sm_90")
    assert list(results) == ["ops::relu", "halve"]
    for name, rs in results.items():
        assert rs and all(r.ok for r in rs), (name, [r.log for r in rs])


def test_nvrtc_names_the_line_as_written():
    needs_nvrtc()
    src = CRAFTED.replace("y[i] = tile[threadIdx.x]; }", "y[i] = tile[threadIdx.x] + undeclared; }")
    (result,) = cupy_ops.load_inline_kernels(src)["ops::relu"].compile_offline("sm_90")
    assert not result.ok and re.search(r"\(23\): error: identifier \"undeclared\" is undefined", result.log)


@pytest.mark.parametrize("stem", sorted(SEEDS))
def test_seed_kernels_compile_from_their_load_inline_string_unchanged(stem):
    needs_nvrtc()
    sources = seed_sources(stem)
    assert [list(split(s).kernels) for s in sources] == SEEDS[stem][1]
    for source in sources:
        kernels = cupy_ops.load_inline_kernels(source)
        assert any(s.what.startswith("#include <torch/extension.h>") for s in kernels.set_aside)
        assert any(s.what.startswith("host function") for s in kernels.set_aside)
        for name, results in kernels.compile_offline("sm_90").items():
            assert results and all(r.ok for r in results), (stem, name, [r.log for r in results])


def test_a_template_kernel_by_the_instantiation_its_wrapper_launched():
    needs_nvrtc()
    src = """#include <torch/extension.h>
template <typename scalar_t>
__global__ void add(const scalar_t* a, const scalar_t* b, scalar_t* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
  auto out = torch::empty_like(a);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "add", ([&] {
    add<scalar_t><<<(a.numel() + 255) / 256, 256>>>(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                                                     out.data_ptr<scalar_t>(), a.numel());
  }));
  return out;
}
"""
    kernels = cupy_ops.load_inline_kernels(src)
    assert kernels.names == ("add",) and [s.line for s in kernels.set_aside] == [1, 7]
    for expr in ("add<float>", "add<double>"):
        (result,) = kernels[expr].compile_offline("sm_90")
        assert result.ok and result.expr == expr, result.log


# What device code takes from torch/extension.h under nvcc: the integer types, the math and
# limits constants, std:: names, numeric_limits; `using namespace at;` is the host's.
STD_NAMES = r"""#include <torch/extension.h>
#include <cmath>
#include <cfloat>
#include <limits>
#include <algorithm>
using namespace at;
using namespace std;
__global__ void names(const float* x, float* y, double* z, uint8_t* m, int64_t n) {
  std::int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float lo = -std::numeric_limits<float>::infinity(), hi = FLT_MAX + INT_MAX * 0.f;
  y[i] = std::exp(v) + exp(v) + std::max(v, lo) + std::min<float>(v, hi) + std::tanh(v) + float(M_PI) + std::abs(v);
  z[i] = std::exp(double(v)) + std::max(1.0, z[i]) + std::floor(2.5) + (std::isnan(v) ? INFINITY : 0.);
  m[i] = uint8_t(v > 0.f);
  z[i] += std::sqrt(n) + std::pow(v, 0.5) + std::fmin(v, 1.0) + std::log(2) + sqrt(int(n));  // promoted as libstdc++
}
torch::Tensor names_cuda(torch::Tensor x) { return x; }
"""


def test_device_code_finds_what_torch_extension_h_gave_it():
    needs_nvrtc()
    kernels = cupy_ops.load_inline_kernels(STD_NAMES)
    assert [s.line for s in kernels.set_aside] == [1, 2, 3, 4, 5, 6, 18]
    assert all(s.what.endswith("<load_inline_limits.h> in its place") for s in kernels.set_aside[:5])
    assert kernels.set_aside[5].what == "using namespace at ; (names torch)"
    (result,) = kernels["names"].compile_offline("sm_90")
    assert result.ok, result.log
    # without numeric_limits the lighter stand-in (no libcu++ <limits>)
    assert "load_inline_std.h" in cupy_ops.load_inline_kernels(STD_NAMES.replace("numeric_limits", "x")).source


def test_a_sources_own_half_operators_compile_as_under_load_inline():
    # torch builds extensions with -D__CUDA_NO_HALF_OPERATORS__ (and three like it), so a source
    # defines its own __half operators; with CUDA's also defined they would be ambiguous
    needs_nvrtc()
    src = r"""#include <torch/extension.h>
#include <cuda_fp16.h>
__device__ __forceinline__ __half operator*(const __half a, const __half b) { return __hmul(a, b); }
__global__ void hmul(const __half* a, __half* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] * a[i];
}
"""
    torch_flags = __import__("torch.utils.cpp_extension", fromlist=["COMMON_NVCC_FLAGS"]).COMMON_NVCC_FLAGS
    assert list(load_inline.TORCH_NVCC_DEFINES) == [f for f in torch_flags if f.startswith("-D")]
    (result,) = cupy_ops.load_inline_kernels(src)["hmul"].compile_offline("sm_90")
    assert result.ok, result.log


def test_a_c_include_in_an_extern_c_block_and_half_through_torch_alone():
    # the stand-in keeps C++ linkage where it stands in an extern "C" block; __half comes with
    # torch/extension.h (c10's headers include cuda_fp16.h)
    needs_nvrtc()
    src = r"""#ifdef __cplusplus
extern "C" {
#endif
#include <stdio.h>
#ifdef __cplusplus
}
#endif
#include <torch/extension.h>
__global__ void k4(const __half* x, float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = __half2float(x[0]); }
"""
    (result,) = cupy_ops.load_inline_kernels(src)["k4"].compile_offline("sm_90")
    assert result.ok, result.log


def test_cudas_half_operators_off_as_under_load_inline_say_so():
    needs_nvrtc()
    src = "#include <torch/extension.h>\n__global__ void h(const __half* a, __half* c) { c[0] = a[0] * a[1]; }\n"
    (result,) = cupy_ops.load_inline_kernels(src)["h"].compile_offline("sm_90")
    assert not result.ok and "(torch's flags for an extension, as load_inline passes them)" in result.log
    assert "options=['-U__CUDA_NO_HALF_OPERATORS__', ...] undoes one" in result.log
    undone = cupy_ops.load_inline_kernels(src, options=["-U__CUDA_NO_HALF_OPERATORS__"])
    (result,) = undone["h"].compile_offline("sm_90")
    assert result.ok, result.log


def test_arch_and_extra_cuda_cflags_pass_through():
    needs_nvrtc()
    src = "#include <torch/extension.h>\n" + WGMMA_FENCE_KERNEL
    flags = ["-O3", "--expt-relaxed-constexpr", "-D", "ROWS=4", "-lineinfo"]  # as extra_cuda_cflags has them
    assert cupy_ops.load_inline_kernels(src, options=" ".join(flags))["fenced"].variant(None).source.flags[-2:] == (
        "-DROWS=4",
        "-lineinfo",
    )
    kernels = cupy_ops.load_inline_kernels(src, arch="sm_90a", options=flags)
    k = kernels["fenced"]
    assert k.variant(None).source.arch == "sm_90a"
    assert k.variant(None).source.flags[-2:] == ("-DROWS=4", "-lineinfo")
    (result,) = k.compile_offline("sm_90")
    assert result.ok and result.arch == "sm_90a", result.log


WGMMA_FENCE_KERNEL = r"""
__global__ void fenced(float* y) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  y[threadIdx.x] = ROWS;
}
"""


def test_a_kernel_the_preprocessor_drops_is_no_kernel():
    src = "#include <torch/extension.h>\n#if 0\n__global__ void old(float* y) {}\n#endif\n"
    src += "__global__ void k(float* y) {}\n"
    assert cupy_ops.load_inline_kernels(src).names == ("k",)
