"""What cupy_ops.Kernel does with a launch's arguments, up to the driver call, on the CPU:
numbers out of their C type's range, launch dimensions and shared memory past CUDA's limits are
a ValueError naming the argument (never struct's OverflowError); arrays of other libraries are
viewed where they live or refused, never copied to another device; arrays on two devices are
an error naming both; the launch runs on the arrays' device.

CUDA tensors are stood in for by a torch.Tensor subclass that says it is on a given device,
and the handle and driver call are recorded instead of made: what reaches them is checked.
"""

import pytest
import torch

import cupy_ops
from cupy_ops import device, launch
from cupy_ops.kernel import arguments
from cupy_ops.kernel import kernel as kernel_class

from conftest import on_device as on

AXPY = r"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
SCALARS = r"""
__global__ void scalars(float* y, float f, double d, int i, unsigned u, long long ll, unsigned long long ull,
                        bool b, char c, unsigned char uc, short s, unsigned short us) { }
"""


class FakeHandle:
    pinned = True


@pytest.fixture
def launches(monkeypatch):
    """Every (variant key, device) asked for and every launch made, recorded instead of run."""
    calls = []

    def handle(self, key, device):
        calls.append(("handle", key, device))
        return FakeHandle()

    monkeypatch.setattr(cupy_ops.Kernel, "handle", handle)
    monkeypatch.setattr(
        launch,
        "launch",
        lambda h, grid, block, values, smem, *rest, **kw: calls.append(
            ("launch", grid, block, tuple(values), smem) + ((rest, kw) if rest or kw else ())
        ),
    )
    return calls


class CudaArray:
    """An array of another library exposing only ``__cuda_array_interface__`` (as Numba's
    device arrays do); its memory must never be read or copied here."""

    def __init__(self, ptr, shape=(8,), typestr="<f4", strides=None, stream=None, mask=None):
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "version": 3,
            "stream": stream,
            "mask": mask,
        }


@pytest.fixture
def devices_of(monkeypatch):
    """Pointers -> the device the driver would say holds them; torch must never copy them."""
    where = {}

    def pointer_device(kernel, pname, ptr):
        return where[ptr]

    monkeypatch.setattr(arguments, "pointer_device", pointer_device)
    monkeypatch.setattr(torch, "as_tensor", lambda *a, **k: pytest.fail("an array was copied through as_tensor"))
    return where


# --- numbers out of range ------------------------------------------------------------------


@pytest.mark.parametrize(
    "index, value, message",
    [
        (
            1,
            1e39,
            r"argument 'f' of kernel scalars \(float\) must fit in a float \(magnitude below 3.40282357e\+38, else "
            r"it rounds to inf\), got 1e\+39",
        ),
        (1, -3.4028236e38, r"argument 'f' of kernel scalars \(float\) must fit in a float"),
        (1, 10**400, r"argument 'f' of kernel scalars \(float\) must fit in a float, got 1000"),
        (2, 10**400, r"argument 'd' of kernel scalars \(double\) must fit in a double"),
        (3, 2**31, r"argument 'i' of kernel scalars \(int\) must be in \[-2147483648, 2147483647\], got 2147483648"),
        (4, -1, r"argument 'u' of kernel scalars \(unsigned\) must be in \[0, 4294967295\], got -1"),
        (6, 2**64, r"argument 'ull' of kernel scalars \(unsigned long long\) must be in \[0, 18446744073709551615\]"),
        (7, 2, r"argument 'b' of kernel scalars \(bool\) must be in \[0, 1\], got 2"),
        (8, 200, r"argument 'c' of kernel scalars \(char\) must be in \[-128, 127\], got 200"),
        (9, 256, r"argument 'uc' of kernel scalars \(unsigned char\) must be in \[0, 255\], got 256"),
        (10, -40000, r"argument 's' of kernel scalars \(short\) must be in \[-32768, 32767\], got -40000"),
        (11, 70000, r"argument 'us' of kernel scalars \(unsigned short\) must be in \[0, 65535\], got 70000"),
    ],
)
def test_a_number_its_c_type_cannot_hold_is_a_value_error(index, value, message):
    k = cupy_ops.Kernel(SCALARS, "scalars")
    args = [None, 1.0, 1.0, 1, 1, 1, 1, True, 1, 1, 1, 1]
    args[index] = value
    with pytest.raises(ValueError, match=message):
        k(*args, grid=1, block=1)


def test_numbers_at_their_limits_are_packed_as_their_c_type(launches):
    k = cupy_ops.Kernel(SCALARS, "scalars")
    k(
        on(0),
        3.4028234663852886e38,
        float("inf"),
        -(2**31),
        2**32 - 1,
        -(2**63),
        2**64 - 1,
        True,
        -128,
        255,
        -32768,
        65535,
        grid=1,
        block=1,
    )
    values = launches[-1][3]
    assert values[1:3] == (3.4028234663852886e38, float("inf"))
    # 32-bit slots hold the bits of the narrower types: the driver copies only their bytes
    assert values[3:] == (2**31, 2**32 - 1, -(2**63), -1, 1, 0xFFFFFF80, 255, 0xFFFF8000, 65535)
    k(on(0), float("nan"), 0.0, 0, 0, 0, 0, False, 0, 0, 0, 0, grid=1, block=1)  # NaN and inf pass
    with pytest.raises(TypeError, match=r"argument 'i' of kernel scalars \(int\) must be an int, got bool"):
        k(on(0), 1.0, 1.0, True, 0, 0, 0, False, 0, 0, 0, 0, grid=1, block=1)


# --- launch dimensions and shared memory ----------------------------------------------------


@pytest.mark.parametrize(
    "grid, block, message",
    [
        (2**32, 1, r"grid dimension x \(unsigned int gridDim.x\) must be in \[0, 2147483647\], got 4294967296"),
        (2**31, 1, r"grid dimension x .* got 2147483648"),
        ((1, 65536), 1, r"grid dimension y \(unsigned int gridDim.y\) must be in \[0, 65535\], got 65536"),
        ((1, 1, 2**40), 1, r"grid dimension z .* got 1099511627776"),
        (1, (1, 1, 65), r"block dimension z \(unsigned int blockDim.z\) must be in \[1, 64\], got 65"),
        (1, 1025, r"block dimension x \(unsigned int blockDim.x\) must be in \[1, 1024\], got 1025"),
        (1, (1, 0), r"block dimension y .* must be in \[1, 1024\], got 0"),
        (1, (32, 32, 2), r"block must have at most 1024 threads, got \(32, 32, 2\) \(2048\)"),
    ],
)
def test_launch_dimensions_past_cudas_limits(grid, block, message):
    k = cupy_ops.Kernel(AXPY, "axpy")
    with pytest.raises(ValueError, match=message):
        k(1.0, None, None, 1, grid=grid, block=block)


def test_the_largest_dimensions_cuda_allows_pass(launches):
    k = cupy_ops.Kernel(AXPY, "axpy")
    k(1.0, on(0), on(0), 8, grid=(2**31 - 1, 65535, 65535), block=(1024, 1, 1))
    k(1.0, on(0), on(0), 8, grid=(1, 1), block=(4, 4, 64))
    assert [c[1:3] for c in launches if c[0] == "launch"] == [
        ((2**31 - 1, 65535, 65535), (1024, 1, 1)),
        ((1, 1, 1), (4, 4, 64)),
    ]


def test_shared_memory_out_of_range(launches, monkeypatch):
    k = cupy_ops.Kernel(AXPY, "axpy")
    with pytest.raises(
        ValueError,
        match=r"shared_mem \(unsigned int sharedMemBytes\) must be in \[0, 4294967295\], "
        r"got -1",
    ):
        k(1.0, on(0), on(0), 8, grid=1, block=8, shared_mem=-1)
    with pytest.raises(ValueError, match=r"got 4294967296"):
        k(1.0, on(0), on(0), 8, grid=1, block=8, shared_mem=2**32)
    with pytest.raises(TypeError, match="shared_mem must be an int"):
        k(1.0, on(0), on(0), 8, grid=1, block=8, shared_mem=1.5)
    # above the 48 KiB every block may use: the device's own limit (cuda:1's here)
    monkeypatch.setattr(kernel_class, "smem_optin", lambda device: {0: 232448, 1: 101376}[device])
    k(1.0, on(1), on(1), 8, grid=1, block=8, shared_mem=101376)
    with pytest.raises(
        ValueError,
        match="shared_mem must be at most 101376 bytes, the dynamic shared memory a block "
        "may have on this device, got 101377",
    ):
        k(1.0, on(1), on(1), 8, grid=1, block=8, shared_mem=101377)
    assert launches[-1] == ("launch", (1, 1, 1), (8, 1, 1), launches[-1][3], 101376)


# --- devices ------------------------------------------------------------------------------


def test_arrays_on_two_devices_name_both(launches):
    k = cupy_ops.Kernel(AXPY, "axpy")
    with pytest.raises(
        ValueError,
        match=r"argument 'y' of kernel axpy is on cuda:1 but argument 'x' is on cuda:0: "
        r"every array of one launch must be on one device",
    ):
        k(1.0, on(0), on(1), 8, grid=1, block=8)
    assert launches == []


def test_the_launch_runs_on_the_arrays_device(launches):
    k = cupy_ops.Kernel(AXPY, "axpy")
    x, y = on(1), on(1)
    k(2.0, x, y, 8, grid=1, block=8)
    assert launches[0] == ("handle", None, 1)
    assert launches[1][3] == (2.0, x.data_ptr(), y.data_ptr(), 8)


def _on_1(t):
    """``t`` (a view torch made of a stand-in, which comes back a plain tensor) as a stand-in on cuda:1."""
    t = t.as_subclass(type(on(1)))
    t.index = 1
    return t


def test_a_tensor_with_a_lazy_negation_or_conjugation_is_refused_naming_it(launches):
    """A kernel reads memory: ``z.conj().imag`` holds its values negated there, ``z.conj()`` its
    values unconjugated. Either is refused, naming the argument and the fix, never read as it is."""
    k = cupy_ops.Kernel(AXPY, "axpy")
    neg = _on_1(torch._neg_view(on(1)))
    assert neg.is_neg() and neg.is_contiguous()
    with pytest.raises(ValueError, match=r"argument 'x' of kernel axpy has its negative bit set .*\.resolve_neg\(\)"):
        k(1.0, neg, on(1), 8, grid=1, block=8)
    c = cupy_ops.Kernel("__global__ void c(const float2* z, int n) { }", "c")
    conj = _on_1(on(1, dtype=torch.complex64).conj())
    assert conj.is_conj()
    with pytest.raises(ValueError, match=r"argument 'z' of kernel c has its conjugate bit set .*\.resolve_conj\(\)"):
        c(conj, 8, grid=1, block=8)
    assert launches == []
    k(1.0, _on_1(neg.resolve_neg()), on(1), 8, grid=1, block=8)  # resolved: launched


# --- arrays of other libraries --------------------------------------------------------------


def test_a_cuda_array_interface_array_is_viewed_on_its_own_device_never_copied(launches, devices_of):
    k = cupy_ops.Kernel(AXPY, "axpy")
    devices_of.update({0x7000_0000: 1, 0x7100_0000: 1})
    x, y = CudaArray(0x7000_0000), CudaArray(0x7100_0000)
    k(1.0, x, y, 8, grid=1, block=8)
    assert launches[0] == ("handle", None, 1)  # cuda:1, where the arrays are
    assert launches[1][3] == (1.0, 0x7000_0000, 0x7100_0000, 8)  # their own memory, not a copy


def test_arrays_of_other_libraries_on_two_devices_name_both(launches, devices_of):
    k = cupy_ops.Kernel(AXPY, "axpy")
    devices_of.update({0x7000_0000: 0, 0x7100_0000: 1})
    with pytest.raises(ValueError, match=r"argument 'y' of kernel axpy is on cuda:1 but argument 'x' is on cuda:0"):
        k(1.0, CudaArray(0x7000_0000), CudaArray(0x7100_0000), 8, grid=1, block=8)
    with pytest.raises(ValueError, match=r"argument 'y' of kernel axpy is on cuda:1 but argument 'x' is on cuda:0"):
        k(1.0, on(0), CudaArray(0x7100_0000), 8, grid=1, block=8)
    assert launches == []


def test_the_device_of_an_interface_pointer_is_never_guessed():
    # a pointer the driver knows nothing of (no GPU here; on a GPU, no allocation at that
    # address): refused, not assumed to be on the current device
    k = cupy_ops.Kernel(AXPY, "axpy")
    with pytest.raises(
        ValueError,
        match=r"argument 'x' of kernel axpy: (cannot tell which device holds its memory "
        r"\(__cuda_array_interface__ pointer 0x70000000\)|its __cuda_array_interface__ "
        r"pointer 0x70000000 is not CUDA device memory)",
    ):
        k(1.0, CudaArray(0x7000_0000), None, 8, grid=1, block=8)


@pytest.mark.parametrize(
    "array, error, message",
    [
        (CudaArray(0x7000_0000, typestr="<f4", mask=(1, False)), ValueError, "masked arrays are not supported"),
        (
            CudaArray(0x7000_0000, shape=(4, 2), strides=(4, 16)),
            ValueError,
            r"argument 'x' of kernel axpy must be contiguous .* got strides \(4, 16\) for shape \(4, 2\)",
        ),
        (CudaArray(0x7000_0000, typestr=">f4"), TypeError, "little-endian numbers only"),
        (CudaArray(0x7000_0000, typestr="<V2"), TypeError, r"element type '<V2' .* has no torch dtype"),
        (CudaArray(0x7000_0000, stream=0), ValueError, "stream 0 in a __cuda_array_interface__ is ambiguous"),
    ],
)
def test_interface_arrays_that_cannot_be_passed(array, error, message, devices_of):
    devices_of[0x7000_0000] = 0
    with pytest.raises(error, match=message):
        cupy_ops.Kernel(AXPY, "axpy")(1.0, array, None, 8, grid=1, block=8)


def test_interface_arrays_are_checked_against_their_parameter(launches, devices_of):
    devices_of.update({0x7000_0000: 0, 0x7100_0000: 0})
    k = cupy_ops.Kernel(AXPY, "axpy")
    with pytest.raises(
        TypeError,
        match=r"argument 'x' of kernel axpy \(const float\*\) must be a tensor of dtype "
        r"torch.float32, got torch.float64",
    ):
        k(1.0, CudaArray(0x7000_0000, typestr="<f8"), CudaArray(0x7100_0000), 8, grid=1, block=8)
    # a C-contiguous array with explicit strides is fine; so is an empty one (a null pointer)
    k(1.0, CudaArray(0x7000_0000, shape=(2, 4), strides=(16, 4)), CudaArray(0, shape=(0,)), 0, grid=1, block=1)
    assert launches[-1][3] == (1.0, 0x7000_0000, 0, 0)


def test_a_dlpack_array_is_viewed_by_torch_where_it_lives(launches, monkeypatch):
    seen = []

    class DLPackOnly:
        def __dlpack__(self, stream=None):
            raise AssertionError("torch.from_dlpack is the one reader")

    def from_dlpack(a):
        seen.append(a)
        return on(1)

    monkeypatch.setattr(torch, "from_dlpack", from_dlpack)
    k = cupy_ops.Kernel(AXPY, "axpy")
    k(1.0, DLPackOnly(), on(1), 8, grid=1, block=8)
    assert len(seen) == 1 and launches[0] == ("handle", None, 1)


def test_default_arguments_fill_the_last_parameters_as_a_launch_does():
    src = "__global__ void scale(float* y, int n, float s = 2.0f, bool twice = true, int k = 0x10, int m = N) {}"
    k = cupy_ops.Kernel(src, "scale")
    plan = k._arg_plan()
    with pytest.raises(TypeError, match=r"takes 6 arguments, got 5: the default of m \(N\) is no number"):
        k._with_defaults((None, 3, 1.0, False, 4), plan)
    with pytest.raises(TypeError, match=r"takes 6 arguments, got 2: the default of m \(N\) is no number: pass it"):
        k(None, 3, grid=1, block=1)
    k2 = cupy_ops.Kernel(src.replace(", int m = N", ""), "scale")
    assert k2._with_defaults((None, 3), k2._arg_plan()) == (None, 3, 2.0, True, 16)
    assert k2._with_defaults((None, 3, 0.5, False), k2._arg_plan()) == (None, 3, 0.5, False, 16)
    with pytest.raises(TypeError, match=r"takes 5 arguments, got 1$"):
        k2(None, grid=1, block=1)
    with pytest.raises(TypeError, match=r"takes 5 arguments, got 6$"):
        k2(None, 3, 0.5, False, 16, 1, grid=1, block=1)
    k3 = cupy_ops.Kernel("__global__ void m(float* y, unsigned mask = -1, int mode = 010, bool on = 2);", "m")
    assert k3._with_defaults((None,), k3._arg_plan()) == (None, 2**32 - 1, 8, True)  # C's conversions, octal


def test_something_else_is_a_type_error_naming_the_argument():
    k = cupy_ops.Kernel(AXPY, "axpy")
    with pytest.raises(
        TypeError,
        match=r"argument 'x' of kernel axpy \(const float\*\) must be a torch.Tensor, a CUDA "
        r"array \(DLPack or __cuda_array_interface__\) or None, got list",
    ):
        k(1.0, [1.0], None, 1, grid=1, block=1)


def test_the_checks_alone():
    assert arguments.launch_dims("grid", (3, 2)) == (3, 2, 1) and arguments.launch_dims("block", 256) == (256, 1, 1)
    assert arguments.launch_dims("grid", 0) == (0, 1, 1)
    assert arguments.cuda_array_interface("k", "x", "float*", CudaArray(16, stream=2).__cuda_array_interface__) == (
        16,
        torch.float32,
        2,
    )


# --- on a GPU: what the CPU cannot show ------------------------------------------------------

COPY = r"""
extern "C" __global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
extern "C" __global__ void spin_fill(float* y, float v, long long cycles, int n) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = v;
}
extern "C" __global__ void smem(float* y) {
  extern __shared__ float s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  y[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
"""


class InterfaceOf:
    """Only the ``__cuda_array_interface__`` of a tensor (as a Numba device array shows it)."""

    def __init__(self, t, stream=None):
        self.__cuda_array_interface__ = dict(t.__cuda_array_interface__, stream=stream)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_an_interface_array_on_another_device_is_written_in_place(cuda):
    k = cupy_ops.Kernel(COPY, "copy")
    x = torch.arange(1000, dtype=torch.float32, device="cuda:1")
    y = torch.zeros(1000, device="cuda:1")
    with torch.cuda.device(0):  # the current device is not the arrays'
        k(InterfaceOf(x), InterfaceOf(y), 1000, grid=8, block=128)
    torch.cuda.synchronize(1)
    assert torch.equal(y, x)  # in place: no copy on cuda:0 took the write
    z = torch.zeros(1000, device="cuda:0")
    with pytest.raises(ValueError, match=r"argument 'y' of kernel copy is on cuda:0 but argument 'x' is on cuda:1"):
        k(InterfaceOf(x), InterfaceOf(z), 1000, grid=8, block=128)


@pytest.mark.gpu
def test_the_pointer_device_comes_from_the_driver(cuda):
    t = torch.zeros(4, device=cuda)
    assert arguments.pointer_device("k", "x", t.data_ptr()) == 0
    host = torch.zeros(4).pin_memory()
    with pytest.raises(ValueError, match="is not CUDA device memory"):
        arguments.pointer_device("k", "x", host.data_ptr())


@pytest.mark.gpu
def test_an_interface_stream_is_waited_for(cuda):
    k = cupy_ops.Kernel(COPY, "copy")
    fill = cupy_ops.Kernel(COPY, "spin_fill")
    x = torch.zeros(1 << 16, device=cuda)
    y = torch.empty_like(x)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        fill(x, 5.0, 50_000_000, x.numel(), grid=1, block=256)  # the producer, still running
    k(InterfaceOf(x, stream=side.cuda_stream), y, x.numel(), grid=x.numel() // 256, block=256)
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full_like(y, 5.0))


@pytest.mark.gpu
def test_shared_memory_up_to_the_devices_limit(cuda):
    k = cupy_ops.Kernel(COPY, "smem")
    limit = device.smem_optin(0)
    y = torch.empty(256, device=cuda)
    k(y, grid=1, block=256, shared_mem=limit)
    assert torch.equal(y, torch.arange(255, -1, -1, dtype=torch.float32, device=cuda))
    with pytest.raises(ValueError, match=f"shared_mem must be at most {limit} bytes"):
        k(y, grid=1, block=256, shared_mem=limit + 1)


STATIC_AND_DYNAMIC = r"""
extern "C" __global__ void both(float* y) {
  __shared__ float fixed[256];
  extern __shared__ float dyn[];
  const int t = threadIdx.x;
  fixed[t] = t;
  dyn[12287 - t] = 2.f * t;   // the last of 48 KB
  __syncthreads();
  y[t] = fixed[255 - t] + dyn[12287 - (255 - t)];
}"""


@pytest.mark.gpu
def test_static_shared_memory_and_48_kb_of_dynamic_launch(cuda):
    """A kernel with static shared memory takes 48 KB of dynamic on top (the device allows it
    once opted in): the launch opts in from the kernel's own default, 48 KB less its static."""
    k = cupy_ops.Kernel(STATIC_AND_DYNAMIC, "both")
    y = torch.empty(256, device=cuda)
    k(y, grid=1, block=256, shared_mem=48 * 1024)
    assert torch.equal(y, 3 * torch.arange(255, -1, -1, dtype=torch.float32, device=cuda))


@pytest.mark.gpu
def test_options_defines_and_an_instantiation_on_the_gpu(cuda):
    code = (
        "template <class T, int N> __global__ void __launch_bounds__(N * 32) scaled(const T* x, T* y, T a, int n) "
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] * a * T(N) + T(OFFSET); }"
    )
    k = cupy_ops.Kernel(code, "scaled<float, 4>", options=["-lineinfo", "-maxrregcount=32"], defines={"OFFSET": 1})
    x = torch.randn(1000, device=cuda)
    y = torch.empty_like(x)
    k(x, y, 0.5, 1000, grid=8, block=128)
    torch.testing.assert_close(y, x * 2.0 + 1.0)
    d = k.specialize(torch.float64, 2)
    xd, yd = x.double(), torch.empty(1000, device=cuda, dtype=torch.float64)
    d(xd, yd, 0.25, 1000, grid=16, block=64)
    torch.testing.assert_close(yd, xd * 0.5 + 1.0)


def test_default_arguments_on_the_gpu(cuda):
    code = "__global__ void fill(float* y, int n, float v = 2.5f, int k = 3) { y[threadIdx.x] = v * k; }"
    k = cupy_ops.Kernel(code, "fill")
    y = torch.zeros(8, device=cuda)
    k(y, 8, grid=1, block=8)
    assert (y == 7.5).all()
    k(y, 8, 1.0, grid=1, block=8)
    assert (y == 3.0).all()


def test_16_bit_float_scalars_are_converted_as_torch_converts_and_range_checked():
    """A __half / __nv_bfloat16 (or a T of float16 / bfloat16) scalar: the bits packed are those
    of torch.tensor(value, dtype) on the CPU, for ordinary, tiny, huge, signed-zero and special
    values; a finite value that would round to inf is a ValueError naming the argument."""
    import struct

    values = [0.1, -0.0, 1 / 3, 65504.0, 65519.0, 6e-8, 1e-40, 3.3895e38, float("inf"), -float("inf"), 1.0 + 2**-9]
    values += torch.randn(200, dtype=torch.float64).mul(1e4).tolist()
    for v in values:
        want_bf16 = torch.tensor(v, dtype=torch.bfloat16).view(torch.int16).item() & 0xFFFF
        assert arguments.kernel_scalar("k", "a", "__nv_bfloat16", "bf16", v) == want_bf16, v
        if abs(v) < 65520 or v != v or abs(v) == float("inf"):
            got = struct.unpack("<H", struct.pack("<e", arguments.kernel_scalar("k", "a", "__half", "f16", v)))[0]
            assert got == torch.tensor(v, dtype=torch.float16).view(torch.int16).item() & 0xFFFF, v
    nan = arguments.kernel_scalar("k", "a", "__nv_bfloat16", "bf16", float("nan"))
    assert nan & 0x7F80 == 0x7F80 and nan & 0x7F
    with pytest.raises(ValueError, match=r"argument 'a' of kernel k \(__half\) must fit in a half"):
        arguments.kernel_scalar("k", "a", "__half", "f16", 65520.0)
    with pytest.raises(ValueError, match=r"argument 'a' of kernel k \(__nv_bfloat16\) must fit in a bfloat16"):
        arguments.kernel_scalar("k", "a", "__nv_bfloat16", "bf16", 3.4e38)
    with pytest.raises(TypeError, match=r"argument 'a' of kernel k \(__half\) must be a real number"):
        arguments.kernel_scalar("k", "a", "__half", "f16", "0.1")
