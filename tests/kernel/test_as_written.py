"""A user's kernel as written, on the CPU: an arch-specific target by a Kernel argument (built
for it offline, refused for others with the reason, and a launch on a device that cannot run it
refused naming both), the preprocessor a C compiler agrees with, and template parameters of any
type, scalars included."""

import re

import pytest
import torch

import cupy_ops
from cupy_ops import compiler, launch

WGMMA_FENCE = r"""
extern "C" __global__ void fenced(float* y) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  y[threadIdx.x] = 1.f;
}
"""


def need_nvrtc():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


def test_an_arch_specific_kernel_is_built_for_its_target_and_refused_for_others():
    need_nvrtc()
    k = cupy_ops.Kernel(WGMMA_FENCE, "fenced", arch="sm_90a")
    [r] = k.compile_offline("sm_90")
    assert r.ok and r.arch == "sm_90a", r.log
    [r] = k.compile_offline("sm_80")
    assert r.skipped and "sm_90a" in r.skipped
    [r] = cupy_ops.Kernel(WGMMA_FENCE, "fenced").compile_offline("sm_90")
    assert not r.ok and "needs the arch-specific target sm_90a" in r.log and 'arch="sm_90a"' in r.log


@pytest.mark.parametrize("arch, error", [("sm_9", ValueError), ("compute_90", ValueError), (90, TypeError)])
def test_a_target_is_checked_when_the_kernel_is_declared(arch, error):
    with pytest.raises(error, match="arch"):
        cupy_ops.Kernel(WGMMA_FENCE, "fenced", arch=arch)


def test_a_launch_on_a_device_that_cannot_run_the_target_names_both(monkeypatch):
    k = cupy_ops.Kernel(WGMMA_FENCE, "fenced", arch="sm_90a")
    monkeypatch.setattr(launch, "_bind_driver", lambda: None)
    monkeypatch.setattr(launch, "capability", lambda device: (8, 0))
    monkeypatch.setattr(launch, "device_arch", lambda device: "sm_80")
    with pytest.raises(
        RuntimeError,
        match=r"kernel fenced on cuda:0: .*built for sm_90a, which runs only on compute capability 9\.0; "
        r"this device is compute capability 8\.0 \(sm_80\)",
    ):
        launch.handle(k.variant(None), 0, ("ptr",))


XMACRO = r"""
extern "C" __global__ void total(float* y) {
  float s = 0.f;
#define ITEM(v) s += v;
#include "items.h"
#undef ITEM
#define ITEM(v) s += v;
#include "items.h"
  y[0] = s;
}
"""


def test_a_header_included_twice_is_compiled_twice(tmp_path):
    """An X-macro header (no guard) read at each include, as a C compiler reads it: the PTX holds
    the constant 2 x (1 + 0.5) = 3, not 1.5."""
    need_nvrtc()
    (tmp_path / "items.h").write_bytes(b"ITEM(1.0f)\r\nITEM(0.5f)\r\n")  # CRLF lines too
    ptx = cupy_ops.Kernel(XMACRO, "total", include_dirs=[tmp_path]).ptx("sm_90")
    # the sum is folded to a constant stored as its bits: 3.0f, not 1.5f
    assert str(0x40400000) in ptx and str(0x3FC00000) not in ptx


SCALE = r"""
template <class T, int N>
__global__ void scale(T a, const T* x, T* y) { y[threadIdx.x] = x[threadIdx.x]; }
"""


@pytest.mark.parametrize(
    "args, kind",
    [
        ((torch.float32, 1), "f32"),
        ((torch.float64, 1), "f64"),
        (("__half", 1), "f16"),
        (("__nv_bfloat16", 1), "bf16"),
        ((torch.int64, 1), "i64"),
        ((torch.int8, 1), "i32"),
    ],
)
def test_a_scalar_of_a_template_parameters_type_takes_the_instantiations_c_type(args, kind):
    k = cupy_ops.Kernel(SCALE, "scale<float, 1>").specialize(*args)
    assert k.params[0][0] == kind


def test_a_per_dtype_templates_scalar_of_its_type_is_converted_per_dtype():
    k = cupy_ops.Kernel("template <class T> __global__ void fill(T v, T* y, long long n) { y[0] = v; }", "fill")
    assert k.params[0] == ("t", "v", "T")
    assert [
        tuple(v.layout[0][2:])
        for v in (k.variant(dt) for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16))
    ] == [(4, 4), (8, 8), (2, 2), (2, 2)]


def test_the_compiled_source_is_the_users_text_as_written(tmp_path):
    """Headers are found by NVRTC (its include folders), not pasted: the source compiled is the
    user's own text after cupy_ops' prelude."""
    (tmp_path / "k.cu").write_text('#include "near.cuh"\nextern "C" __global__ void k(float* y) { y[0] = NEAR; }\n')
    (tmp_path / "near.cuh").write_text("#define NEAR 2.0f\n")
    k = cupy_ops.Kernel(tmp_path / "k.cu", "k")
    src = k.variant(None).source
    assert '#include "near.cuh"' in src.text() and "#define NEAR" not in src.text()
    assert isinstance(src, compiler.Source)


def test_a_users_kernel_keeps_denormals_as_nvcc_builds_it():
    # nvcc's and NVRTC's default is -ftz=false; cupy_ops' own kernels build with -ftz=true
    need_nvrtc()
    src = 'extern "C" __global__ void fma3(const float* a, float* y) { y[0] = a[0] * a[1] + (a[2] < a[3]); }'
    ptx = cupy_ops.Kernel(src, "fma3").ptx("sm_90")
    assert re.search(r"\bfma\.rn\.f32\b", ptx) and re.search(r"\bsetp\.lt\.f32\b", ptx) and ".ftz" not in ptx
    flushed = cupy_ops.Kernel(src, "fma3", options=["-ftz=true"]).ptx("sm_90")
    assert "fma.rn.ftz.f32" in flushed
