"""cupy_ops.Kernel: user CUDA C from a string or a file, checked arguments, typed errors."""

import gc
import weakref

import pytest
import torch

import cupy_ops
from cupy_ops.kernel import parse_signature

SCALE = r"""
template <class T>
__global__ void scale(const T* x, T* y, float s, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_float<T>(to_float(x[i]) * s);
}
"""
AXPY = r"""
extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_parse_signature():
    t, params = parse_signature(SCALE, "scale")
    assert t == "T" and [k for k, _, _ in params] == ["ptr", "ptr", "f32", "i64"]
    t, params = parse_signature(AXPY, "axpy")
    assert t is None and [(k, n) for k, n, _ in params] == [("f32", "a"), ("ptr", "x"), ("ptr", "y"), ("i32", "n")]


def test_construction_errors(tmp_path):
    with pytest.raises(ValueError, match=r"no `__global__ void nope\(...\)` found"):
        cupy_ops.Kernel(SCALE, "nope")
    with pytest.raises(ValueError, match="parameter 'p' of kernel k has type 'Foo'"):
        cupy_ops.Kernel("__global__ void k(Foo p) {}", "k")
    with pytest.raises(FileNotFoundError):
        cupy_ops.Kernel(tmp_path / "missing.cu", "k")
    with pytest.raises(TypeError, match="source must be CUDA code"):
        cupy_ops.Kernel(42, "k")
    with pytest.raises(TypeError, match="name must be the kernel's name or a name expression"):
        cupy_ops.Kernel(SCALE, 42)
    with pytest.raises(ValueError, match="'not a name' is not a kernel name or a name expression"):
        cupy_ops.Kernel(SCALE, "not a name")


def test_user_kernel_compiles_offline():
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
    from cupy_ops import compiler

    k = cupy_ops.Kernel(SCALE, "scale")
    results = compiler.compile_offline(k.variant(torch.float32).source, "sm_90")
    assert [r.expr for r in results] == ["scale<float>", "scale<f16>", "scale<bf16>", "scale<double>"]
    assert all(r.ok for r in results), [r.log for r in results]


def test_call_errors_on_cpu():
    k = cupy_ops.Kernel(SCALE, "scale")
    x = torch.randn(8)
    with pytest.raises(TypeError, match=r"kernel scale\(x, y, s, n\) takes 4 arguments, got 3"):
        k(x, x, 2.0, grid=1, block=8)
    with pytest.raises(ValueError, match="argument 'x' of kernel scale must be a CUDA tensor"):
        k(x, x, 2.0, 8, grid=1, block=8)
    with pytest.raises(TypeError, match=r"argument 's' of kernel scale \(float\) must be a real number, got str"):
        k(None, None, "2", 8, grid=1, block=8)
    with pytest.raises(TypeError, match=r"argument 'n' of kernel scale \(long long\) must be an int, got float"):
        k(None, None, 2.0, 8.0, grid=1, block=8)
    with pytest.raises(ValueError, match="block must have at most 1024 threads"):
        k(x, x, 2.0, 8, grid=1, block=(64, 32))
    with pytest.raises(
        ValueError,
        match=r"grid dimension x \(unsigned int gridDim.x\) must be in \[0, 2147483647\], "
        r"got -1",
    ):
        k(x, x, 2.0, 8, grid=-1, block=8)
    with pytest.raises(TypeError, match="grid must be an int or a tuple of 1 to 3 ints"):
        k(x, x, 2.0, 8, grid=1.0, block=8)
    with pytest.raises(ValueError, match="needs at least one CUDA tensor argument"):
        k(None, None, 2.0, 8, grid=1, block=8)


def test_int_arguments_are_range_checked_by_their_c_type():
    k = cupy_ops.Kernel("__global__ void k(float* y, int a, unsigned int b, long long c, unsigned long long d) {}", "k")
    ok = dict(a=-(2**31), b=2**32 - 1, c=-(2**63), d=2**64 - 1)
    with pytest.raises(ValueError, match="needs at least one CUDA tensor"):  # every scalar passed its check
        k(None, *ok.values(), grid=1, block=1)
    for name, bad, rng in [
        ("a", 2**31 + 5, r"\[-2147483648, 2147483647\]"),
        ("b", -1, r"\[0, 4294967295\]"),
        ("c", 2**63, r"\[-9223372036854775808, 9223372036854775807\]"),
        ("d", -1, r"\[0, 18446744073709551615\]"),
    ]:
        args = dict(ok, **{name: bad})
        with pytest.raises(ValueError, match=rf"argument '{name}' of kernel k \(.*\) must be in {rng}, got {bad}"):
            k(None, *args.values(), grid=1, block=1)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_template_kernel_from_string(dtype, cuda):
    k = cupy_ops.Kernel(SCALE, "scale")
    x = torch.randn(1000, device=cuda, dtype=dtype)
    y = torch.empty_like(x)
    k(x, y, 2.5, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    assert torch.equal(y, (x.to(acc) * 2.5).to(dtype))


@pytest.mark.gpu
def test_kernel_from_file_on_a_side_stream(cuda, tmp_path):
    path = tmp_path / "axpy.cu"
    path.write_text(AXPY)
    k = cupy_ops.Kernel(path, "axpy")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(5000, device=cuda)
        y = torch.ones(5000, device=cuda)
        k(3.0, x, y, 5000, grid=cupy_ops.cdiv(5000, 128), block=128)
    s.synchronize()
    torch.testing.assert_close(y, 3.0 * x + 1.0)


@pytest.mark.gpu
def test_gpu_call_errors(cuda):
    k = cupy_ops.Kernel(SCALE, "scale")
    x = torch.randn(64, device=cuda)
    with pytest.raises(TypeError, match=r"argument 'y' of kernel scale must have dtype torch\.float32"):
        k(x, x.half(), 1.0, 64, grid=1, block=64)
    with pytest.raises(ValueError, match="argument 'x' of kernel scale must be contiguous"):
        k(x.view(8, 8).t(), x, 1.0, 64, grid=1, block=64)
    with pytest.raises(TypeError, match=r"argument 'x' of kernel scale picks T; it must be float32, .*got torch.int32"):
        k(x.int(), x.int(), 1.0, 64, grid=1, block=64)
    k(x, x, 1.0, 64, grid=0, block=64)  # empty grid: no launch, no error


@pytest.mark.gpu
def test_user_kernel_compile_error(cuda):
    k = cupy_ops.Kernel("__global__ void bad(float* p) { p[0] = undefined_thing; }", "bad")
    x = torch.zeros(1, device=cuda)
    with pytest.raises(cupy_ops.KernelCompileError, match="undefined_thing") as info:
        k(x, grid=1, block=1)
    assert "bad" in info.value.source
    assert torch.equal(cupy_ops.relu(x), x)  # the library keeps working


@pytest.mark.gpu
def test_the_template_type_comes_from_a_parameter_of_that_type(cuda):
    gather = cupy_ops.Kernel(
        """
template <class T>
__global__ void gather(const long long* idx, const T* x, T* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[idx[i]];
}""",
        "gather",
    )
    x = torch.randn(1000, device=cuda, dtype=torch.float16)
    idx = torch.randint(0, 1000, (777,), device=cuda)
    y = torch.empty(777, device=cuda, dtype=torch.float16)
    gather(idx, x, y, 777, grid=4, block=256)
    assert torch.equal(y, x[idx])


@pytest.mark.gpu
def test_pointer_arguments_must_match_their_element_type(cuda):
    k = cupy_ops.Kernel("__global__ void k(const float* x, unsigned short* bits, long long* idx, void* any) {}", "k")
    f32, f16 = torch.zeros(4, device=cuda), torch.zeros(4, device=cuda, dtype=torch.float16)
    i64 = torch.zeros(4, device=cuda, dtype=torch.int64)
    k(f32, f16, i64, f16, grid=1, block=1)  # u16 takes any 2-byte dtype; void* anything
    with pytest.raises(
        TypeError,
        match=r"argument 'x' of kernel k \(const float\*\) must be a tensor of dtype "
        r"torch.float32, got torch.float16",
    ):
        k(f16, f16, i64, None, grid=1, block=1)
    with pytest.raises(
        TypeError,
        match=r"argument 'bits' of kernel k .* must be a tensor of 2-byte elements, got "
        r"torch.float32",
    ):
        k(f32, f32, i64, None, grid=1, block=1)
    with pytest.raises(
        TypeError,
        match=r"argument 'idx' of kernel k .* must be a tensor of dtype torch.int64, got "
        r"torch.int32",
    ):
        k(f32, f16, i64.int(), None, grid=1, block=1)


# --- releasing the modules of kernels no longer referenced -------------------------------


def _fill_kernel(value: int) -> "cupy_ops.Kernel":
    return cupy_ops.Kernel(
        f"__global__ void fill(float* y, int n) {{ int i = blockIdx.x * blockDim.x + "
        f"threadIdx.x; if (i < n) y[i] = {value}.0f; }}",
        "fill",
    )


def test_a_kernel_no_longer_referenced_leaves_the_registry():
    from cupy_ops import compiler

    k = _fill_kernel(123456789)
    src = k._source
    assert src in compiler.sources(builtin_only=False)
    del k
    gc.collect()
    _fill_kernel(987654321)  # the next Kernel settles the released ones
    assert src not in compiler.sources(builtin_only=False)


def _user_handles():
    from cupy_ops import launch

    return [h for (v, _), h in launch.handles.items() if not v.source.builtin]


@pytest.mark.gpu
def test_user_modules_are_released_when_their_kernels_are_gone(cuda):
    from cupy_ops import launch

    gc.collect()
    before = len(_user_handles())
    refs = []
    y = torch.empty(256, device=cuda)
    for i in range(40):
        k = _fill_kernel(1000 + i)
        k(y, 256, grid=1, block=256)
        assert y[0].item() == 1000 + i
        refs.append(weakref.ref(launch.handles[(k.variant(None), 0)]))
        del k
        gc.collect()
    last = _fill_kernel(5)
    last(y, 256, grid=1, block=256)  # loading it unloads the released ones
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive <= 1, f"{alive} of 40 released kernels' modules are still loaded"
    assert len(_user_handles()) <= before + 2
    assert torch.equal(y, torch.full_like(y, 5.0))


SPIN = r"""
__global__ void spin_then_write(float* y, long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
  y[threadIdx.x] = 7.0f;
}
"""


@pytest.mark.gpu
def test_a_released_kernel_finishes_its_queued_launches(cuda):
    y = torch.zeros(32, device=cuda)
    k = cupy_ops.Kernel(SPIN, "spin_then_write")
    k(y, 200_000_000, grid=1, block=32)  # ~0.1 s on the GPU; the host returns at once
    del k
    gc.collect()
    other = _fill_kernel(3)  # loads a module: the released one is unloaded
    z = torch.empty(8, device=cuda)
    other(z, 8, grid=1, block=8)
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full_like(y, 7.0)) and torch.equal(z, torch.full_like(z, 3.0))


@pytest.mark.gpu
def test_a_kernel_captured_in_a_cuda_graph_stays_loaded(cuda):
    y = torch.zeros(64, device=cuda)
    k = _fill_kernel(42)
    k(y, 64, grid=1, block=64)  # compiled and loaded before the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        k(y, 64, grid=1, block=64)
    del k
    gc.collect()
    _fill_kernel(43)(torch.empty(1, device=cuda), 1, grid=1, block=1)  # unloads released modules
    y.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full_like(y, 42.0))


@pytest.mark.gpu
def test_kernel_takes_arrays_of_other_libraries_without_a_copy(cuda):
    cupy = pytest.importorskip("cupy")
    axpy = cupy_ops.Kernel(AXPY, "axpy")
    x = cupy.arange(1000, dtype=cupy.float32)
    y = cupy.ones(1000, dtype=cupy.float32)
    y_ptr = y.data.ptr
    axpy(2.0, x, y, 1000, grid=cupy_ops.cdiv(1000, 128), block=128)  # DLPack
    torch.cuda.synchronize()
    assert y.data.ptr == y_ptr and bool(cupy.all(y == 2 * x + 1))

    class OnlyCudaArrayInterface:  # e.g. a Numba device array
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__

    axpy(1.0, OnlyCudaArrayInterface(x), OnlyCudaArrayInterface(y), 1000, grid=8, block=128)
    torch.cuda.synchronize()
    assert bool(cupy.all(y == 3 * x + 1))
    scale = cupy_ops.Kernel(SCALE, "scale")  # the template type comes from the array's dtype
    h = cupy.linspace(-4, 4, 777, dtype=cupy.float16)
    out = cupy.empty_like(h)
    scale(h, out, 0.5, 777, grid=4, block=256)
    torch.cuda.synchronize()
    assert bool(cupy.all(out == h * cupy.float16(0.5)))
    with pytest.raises(TypeError, match=r"argument 'x' of kernel axpy .* must be a torch.Tensor, a CUDA array"):
        axpy(1.0, [1.0, 2.0], y, 2, grid=1, block=2)
