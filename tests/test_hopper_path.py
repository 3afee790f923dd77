"""The host side of the Hopper GEMM path: sm_90a-only sources (own NVRTC compile, disk
cache, errors), TMA tensor-map arguments, and the errors of algo='wgmma'."""
import pytest
import torch

import cupy_ops
from cupy_ops import KernelCompileError, compiler
from conftest import HOPPER

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")


def test_sm90a_binary_is_compiled_for_that_arch_and_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    spec = compiler.registered()["matmul_sm90a.cu"]
    cubin, lowered = compiler._arch_binary(spec)
    assert set(lowered) == set(spec.name_expressions) and cubin[:4] == b"\x7fELF"
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and all(f.startswith("cupy_ops_sm_90a_") for f in files)
    # a second process finds both files: only NVRTC's version is asked (it is in the cache key)
    version = nvrtc.getVersion()
    monkeypatch.setattr(compiler, "offline_nvrtc", lambda: type("VersionOnly", (), {"getVersion": lambda: version}))
    assert compiler._arch_binary(spec) == (cubin, lowered)


def test_sm90a_compile_error_carries_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    spec = compiler.SourceSpec("bad_sm90a.cu", ("k",), code='extern "C" __global__ void k() { undeclared_x; }',
                               arch="sm_90a")
    with pytest.raises(KernelCompileError) as info:
        compiler._arch_binary(spec)
    assert "undeclared_x" in info.value.log and "-arch=sm_90a" in str(info.value)


def test_sm90a_sources_are_skipped_for_other_archs():
    spec = compiler.registered()["linear_relu_div_sm90a.cu"]
    assert spec.builds_for("sm_90") == "sm_90a" and spec.builds_for("sm_80") is None
    assert spec.builds_for("sm_100") is None


def test_tensor_map_argument_must_be_128_bytes():
    k = cupy_ops.Kernel("struct __align__(64) TmaMap { unsigned long long o[16]; };\n"
                        "__global__ void k(const __grid_constant__ TmaMap m, float* y) { }", "k")
    assert [kind for kind, _, _ in k.params] == ["tmap", "ptr"]
    with pytest.raises(TypeError, match="argument 'm' of kernel k .* must be the 128 bytes of a TMA tensor map"):
        k(b"short", None, grid=1, block=1)


@pytest.mark.gpu
def test_wgmma_algo_errors(cuda, monkeypatch):
    from cupy_ops.ops import _gemm

    a = torch.randn(8, 8, device=cuda, dtype=torch.float64)
    with pytest.raises(ValueError, match="algo='wgmma' takes float16, bfloat16 or float32"):
        cupy_ops.matmul(a, a, algo="wgmma")
    monkeypatch.setattr(_gemm, "has_wgmma", lambda device: False)
    with pytest.raises(ValueError, match=r"algo='wgmma' needs a Hopper GPU \(compute capability 9.0\); cuda:0 has"):
        cupy_ops.linear_relu_div(a.float(), a.float(), None, 2.0, algo="wgmma")
    # and "auto" then takes the mma.sync kernel
    assert _gemm.choose("auto", torch.bfloat16, 64, 0) == "tc"


@pytest.mark.gpu
def test_sm90a_source_refuses_another_architecture(cuda):
    spec = compiler.register("other_arch.cu", ["k"], code='extern "C" __global__ void k() {}', arch="sm_100a")
    try:
        with pytest.raises(RuntimeError, match="other_arch.cu is built for sm_100a only; cuda:0 is sm_"):
            compiler.get_function(spec.filename, "k", 0)
    finally:
        compiler._registry.pop("other_arch.cu", None)


@pytest.mark.gpu
def test_tensor_map_rejected_by_the_driver_raises(cuda):
    if not HOPPER:
        pytest.skip("tensor maps need a Hopper GPU (compute capability 9.0)")
    from cupy_ops.ops import _tma

    t = torch.zeros(64, 64, device=cuda, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"cuTensorMapEncodeTiled failed \(CUresult \d+\) for a 64x64"):
        _tma.tensor_map(t, 64, 64, 64, 512, 64)   # a box wider than 256 elements


def test_registering_more_variants_rebuilds_an_sm90a_binary(tmp_path, monkeypatch):
    """Two Kernel objects of one sm_90a file register their variants when first used: the
    binary built for the first must not be reused for the second's."""
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    code = 'template <int N> __global__ void k(float* y) { y[0] = N; }'
    try:
        spec = compiler.register("two_kernels_sm90a.cu", ["k<1>"], code=code, arch="sm_90a")
        compiler._arch_binaries[spec.filename] = compiler._arch_binary(spec)
        spec = compiler.register("two_kernels_sm90a.cu", ["k<2>"], code=code, arch="sm_90a")
        assert spec.filename not in compiler._arch_binaries
        assert set(compiler._arch_binary(spec)[1]) == {"k<1>", "k<2>"}
    finally:
        compiler._registry.pop("two_kernels_sm90a.cu", None)
        compiler._arch_binaries.pop("two_kernels_sm90a.cu", None)
