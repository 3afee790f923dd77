"""Kernel's launch modes: ``stream=``, ``cluster=``, ``cooperative=True`` and
``Kernel.occupancy``. On the CPU: what reaches the one launch function (the handle and the
driver call recorded instead of made), the checks and their messages, the launch attributes'
layout, and the test kernels compiled for sm_90. On the GPU: the cluster rank seen in the
kernel, a grid-wide sync, the driver's occupancy, the stream launched on."""

import ctypes

import pytest
import torch

import cupy_ops
from cupy_ops import device, launch, occupancy
from cupy_ops.kernel import kernel as kernel_class

from conftest import on_device as on

COPY = r"""
extern "C" __global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
"""
# Each block writes its rank in its cluster and the cluster's size, read from PTX's special
# registers (compute capability 9.0).
CLUSTER = r"""
extern "C" __global__ void cluster_rank(int* rank, int* size) {
  unsigned r, n;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  if (threadIdx.x == 0) {
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    rank[b] = (int)r;
    size[b] = (int)n;
  }
}
"""
# A two-phase sum: each block sums its share into partial[block], the whole grid waits at a
# barrier (sound only when every block is resident: a cooperative launch), then each block
# sums all the partial sums into out[block].
GRID_SUM = r"""
__device__ void grid_barrier(unsigned* arrived, volatile unsigned* generation) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned g = *generation;
    __threadfence();
    if (atomicAdd(arrived, 1u) == gridDim.x - 1) {
      *arrived = 0;
      __threadfence();
      atomicAdd((unsigned*)generation, 1u);
    } else {
      while (*generation == g) { }
    }
    __threadfence();
  }
  __syncthreads();
}

extern "C" __global__ void grid_sum(const float* x, float* partial, float* out, unsigned* sync, int n) {
  __shared__ float s[256];
  float v = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) v += x[i];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
  grid_barrier(sync, sync + 1);
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (unsigned b = 0; b < gridDim.x; ++b) t += ((volatile float*)partial)[b];
    out[blockIdx.x] = t;
  }
}
"""
# Shared memory and registers set the occupancy: 40 KB of static shared memory per block.
SMEM = r"""
extern "C" __global__ void smem40k(float* y) {
  __shared__ float s[10240];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  y[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
"""


class FakeHandle:
    pinned = True
    device = 0


@pytest.fixture
def launches(monkeypatch):
    calls = []
    monkeypatch.setattr(cupy_ops.Kernel, "handle", lambda self, key, device: FakeHandle())
    monkeypatch.setattr(
        launch, "launch", lambda h, grid, block, values, smem, *rest, **kw: calls.append((grid, block, smem, rest, kw))
    )
    return calls


# --- on the CPU ----------------------------------------------------------------------------


def test_cluster_and_stream_reach_the_one_launch_function(launches, monkeypatch):
    k = cupy_ops.Kernel(COPY, "copy")
    x, y = on(0), on(0)
    k(x, y, 8, grid=(4, 2), block=32, cluster=(2, 2))
    k(x, y, 8, grid=4, block=32, cluster=2)
    k(x, y, 8, grid=4, block=32, cluster=1)
    monkeypatch.setattr(launch, "stream_device", lambda s: 0)
    k(x, y, 8, grid=4, block=32, stream=0x1234)
    k(x, y, 8, grid=4, block=32)
    assert launches == [
        ((4, 2, 1), (32, 1, 1), 0, ((2, 2, 1),), {"stream": None, "cooperative": False}),
        ((4, 1, 1), (32, 1, 1), 0, ((2, 1, 1),), {"stream": None, "cooperative": False}),
        ((4, 1, 1), (32, 1, 1), 0, (1,), {"stream": None, "cooperative": False}),
        ((4, 1, 1), (32, 1, 1), 0, (1,), {"stream": 0x1234, "cooperative": False}),
        ((4, 1, 1), (32, 1, 1), 0, (), {}),
    ]


@pytest.mark.parametrize(
    "cluster, grid, error, message",
    [
        ("2", 4, TypeError, r"cluster must be an int or a tuple of 1 to 3 ints, got '2'"),
        ((2, 1, 1, 1), 4, TypeError, "cluster must be an int or a tuple of 1 to 3 ints"),
        (True, 4, TypeError, "cluster must be an int"),
        (0, 4, ValueError, "cluster dimension x must be at least 1, got 0"),
        ((4, 8), (4, 8), ValueError, r"cluster \(4, 8, 1\) has 32 CTAs; a cluster has at most 16"),
        (3, 4, ValueError, r"grid dimension x \(4\) must be a multiple of the cluster's \(3\)"),
        ((1, 2), (4, 3), ValueError, r"grid dimension y \(3\) must be a multiple of the cluster's \(2\)"),
    ],
)
def test_cluster_shapes_that_cannot_launch(launches, cluster, grid, error, message):
    k = cupy_ops.Kernel(COPY, "copy")
    with pytest.raises(error, match=message):
        k(on(0), on(0), 8, grid=grid, block=32, cluster=cluster)
    assert launches == []


class CupyLikeStream:
    """A stream speaking cuda.core's ``__cuda_stream__`` with CuPy's ``device_id``."""

    def __init__(self, handle, device_id=None):
        self.handle, self.device_id = handle, device_id

    def __cuda_stream__(self):
        return (0, self.handle)


def test_streams_of_every_kind_and_on_another_device(launches, monkeypatch):
    k = cupy_ops.Kernel(COPY, "copy")
    x, y = on(1), on(1)
    k(x, y, 8, grid=1, block=8, stream=CupyLikeStream(0xABC, 1))
    assert launches[-1][4]["stream"] == 0xABC
    with pytest.raises(ValueError, match=r"stream is on cuda:0 but the kernel's arrays are on cuda:1"):
        k(x, y, 8, grid=1, block=8, stream=CupyLikeStream(0xABC, 0))
    monkeypatch.setattr(launch, "stream_device", lambda s: {0x10: 0, 0x11: 1}.get(s))
    k(x, y, 8, grid=1, block=8, stream=0x11)
    assert launches[-1][4]["stream"] == 0x11
    with pytest.raises(
        ValueError,
        match=r"stream is on cuda:0 but the kernel's arrays are on cuda:1; launch on a "
        r"stream of cuda:1",
    ):
        k(x, y, 8, grid=1, block=8, stream=0x10)
    for bad, message in ((True, "got bool"), ("s", "got str"), (1.5, "got float")):
        with pytest.raises(TypeError, match=f"stream must be a torch.cuda.Stream, .*{message}"):
            k(x, y, 8, grid=1, block=8, stream=bad)
    with pytest.raises(TypeError, match="the handle must be a non-negative int"):
        k(x, y, 8, grid=1, block=8, stream=CupyLikeStream(-1))


def test_the_default_streams_are_the_current_devices():
    assert launch.stream_device(0) is None and launch.stream_device(2) is None


def test_a_cooperative_grid_must_be_resident_at_once(launches, monkeypatch):
    k = cupy_ops.Kernel(COPY, "copy")
    monkeypatch.setattr(occupancy, "blocks_per_sm", lambda h, block, smem: 2 if block == (256, 1, 1) else 1)
    monkeypatch.setattr(kernel_class, "attribute", lambda device, attr: {16: 4, 95: 1}[attr])
    monkeypatch.setattr(kernel_class, "sm_count", lambda device: 4)
    k(on(0), on(0), 8, grid=8, block=256, cooperative=True)
    assert launches[-1][4] == {"stream": None, "cooperative": True}
    with pytest.raises(
        ValueError,
        match=r"cooperative=True: grid \(9, 1, 1\) has 9 blocks, but at most 8 blocks of "
        r"kernel copy \(block \(256, 1, 1\), 0 bytes of dynamic shared memory\) are "
        r"resident on cuda:0 at once \(2 per SM\)",
    ):
        k(on(0), on(0), 8, grid=9, block=256, cooperative=True)
    with pytest.raises(ValueError, match=r"has 8 blocks, but at most 4"):
        k(on(0), on(0), 8, grid=(4, 2), block=512, cooperative=True)
    monkeypatch.setattr(kernel_class, "attribute", lambda device, attr: {16: 4, 95: 0}[attr])
    monkeypatch.setattr(kernel_class, "sm_count", lambda device: 4)
    with pytest.raises(ValueError, match="cuda:0 does not support cooperative launches"):
        k(on(0), on(0), 8, grid=1, block=256, cooperative=True)
    assert len(launches) == 1


def test_occupancy_names_the_instantiation_as_ptx_does():
    per_dtype = cupy_ops.Kernel("template <class T> __global__ void k(T* y) { }", "k")
    with pytest.raises(TypeError, match=r"kernel k is instantiated per dtype: pass dtype="):
        per_dtype.occupancy(256)
    with pytest.raises(TypeError, match=r"kernel copy has one instantiation \(copy\): dtype= picks none"):
        cupy_ops.Kernel(COPY, "copy").occupancy(256, dtype=torch.float32)
    assert per_dtype.variant_key(torch.zeros(2, dtype=torch.float16)) == torch.float16
    assert cupy_ops.Kernel(COPY, "copy").variant_key(None, None, 3) is None


def test_launch_attributes_are_cudas_structs():
    """CUlaunchAttribute is 72 bytes (id, padding, a 64-byte value union); CUlaunchConfig 56."""
    assert ctypes.sizeof(launch._LaunchAttribute) == 72 and ctypes.sizeof(launch.LaunchConfig) == 56
    assert launch.LaunchConfig.hStream.offset == 32 and launch.LaunchConfig.attrs.offset == 40
    attrs, n = launch._attributes((2, 2, 1), True)
    assert n == 2 and [(a.id, a.x, a.y, a.z) for a in attrs] == [(4, 2, 2, 1), (2, 1, 0, 0)]
    attrs, n = launch._attributes(1, True)
    assert n == 1 and attrs[0].id == 2
    assert launch.cluster_dims(4) == (4, 1, 1) and launch.cluster_dims((2, 3)) == (2, 3, 1)


def test_a_cluster_launch_builds_its_configuration_once(monkeypatch):
    """cuLaunchKernelEx's configuration (two ctypes structures, ~3 us to build) is kept per
    (grid, block, shared memory, stream, cluster, cooperative) and read back unchanged; a grid
    given as a list is built for its launch; a cluster past 8 CTAs asks each handle once for
    non-portable sizes (driver stubbed: runs without a GPU)."""
    import types

    seen = []

    def fake_launch(cfg_ref, fn, params, extra):
        cfg = cfg_ref._obj
        attr = launch._LaunchAttribute.from_address(cfg.attrs)
        seen.append(
            (id(cfg), cfg.gridDimX, cfg.blockDimX, cfg.sharedMemBytes, cfg.hStream, cfg.numAttrs, attr.x, attr.y)
        )
        return 0

    monkeypatch.setattr(launch, "_launch_kernel_ex", fake_launch)
    monkeypatch.setattr(launch, "_ex_configs", {})
    asked = []
    h = types.SimpleNamespace(name="k", device=0, ptr=1, non_portable=False)
    h.allow_non_portable_clusters = lambda: asked.append(1) or setattr(h, "non_portable", True)
    launch._launch_ex(h, (132, 1, 1), (384, 1, 1), 1000, 7, 0, 2, False)
    launch._launch_ex(h, (132, 1, 1), (384, 1, 1), 1000, 7, 0, 2, False)
    launch._launch_ex(h, (132, 1, 1), (384, 1, 1), 1000, 8, 0, (1, 2), False)  # another stream and shape
    launch._launch_ex(h, [64, 1, 1], (128, 1, 1), 0, 7, 0, 2, False)
    assert seen[0] == seen[1] and seen[0][1:] == (132, 384, 1000, 7, 1, 2, 1)
    assert seen[2][0] != seen[0][0] and seen[2][1:] == (132, 384, 1000, 8, 1, 1, 2)
    assert seen[3][1:] == (64, 128, 0, 7, 1, 2, 1) and len(launch._ex_configs) == 2
    assert not asked
    launch._launch_ex(h, (128, 1, 1), (384, 1, 1), 0, 7, 0, 16, False)
    launch._launch_ex(h, (128, 1, 1), (384, 1, 1), 0, 7, 0, 16, False)
    assert asked == [1] and seen[-1][6] == 16


@pytest.mark.parametrize(
    "code, name", [(CLUSTER, "cluster_rank"), (GRID_SUM, "grid_sum"), (SMEM, "smem40k"), (COPY, "copy")]
)
def test_the_gpu_tests_kernels_compile_for_sm_90(code, name):
    pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="CuPy (with NVRTC) is not installed")
    results = cupy_ops.Kernel(code, name).compile_offline("sm_90")
    assert all(r.ok for r in results), results[0].log
    if name == "smem40k":
        assert results[0].shared_bytes == 40960


# --- on the GPU ----------------------------------------------------------------------------


def need_hopper():
    if torch.cuda.get_device_capability(0) < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "grid, cluster", [((4, 2, 1), (2, 2, 1)), ((8, 1, 1), 2), ((4, 4, 2), (1, 2, 2)), ((16, 1, 1), 16)]
)
def test_the_cluster_rank_is_visible_in_the_kernel(cuda, grid, cluster):
    need_hopper()
    k = cupy_ops.Kernel(CLUSTER, "cluster_rank")
    n = grid[0] * grid[1] * grid[2]
    rank = torch.full((n,), -1, dtype=torch.int32, device=cuda)
    size = torch.full((n,), -1, dtype=torch.int32, device=cuda)
    k(rank, size, grid=grid, block=32, cluster=cluster)
    c = launch.cluster_dims(cluster)
    expected = [
        (bx % c[0]) + c[0] * ((by % c[1]) + c[1] * (bz % c[2]))
        for bz in range(grid[2])
        for by in range(grid[1])
        for bx in range(grid[0])
    ]
    assert rank.tolist() == expected
    assert size.tolist() == [c[0] * c[1] * c[2]] * n


@pytest.mark.gpu
def test_without_a_cluster_each_block_is_its_own(cuda):
    need_hopper()
    k = cupy_ops.Kernel(CLUSTER, "cluster_rank")
    rank = torch.full((4,), -1, dtype=torch.int32, device=cuda)
    size = torch.full((4,), -1, dtype=torch.int32, device=cuda)
    k(rank, size, grid=4, block=32)
    assert rank.tolist() == [0] * 4 and size.tolist() == [1] * 4


@pytest.mark.gpu
def test_a_cooperative_launch_syncs_the_whole_grid(cuda):
    k = cupy_ops.Kernel(GRID_SUM, "grid_sum")
    occ = k.occupancy(256)
    blocks = occ.resident_blocks  # every block resident: the most a cooperative grid may have
    assert blocks >= occ.sms
    x = torch.randint(0, 8, (1 << 20,), device=cuda).float()  # integers: every order sums exactly
    partial = torch.zeros(blocks, device=cuda)
    out = torch.zeros(blocks, device=cuda)
    sync = torch.zeros(2, dtype=torch.int32, device=cuda)
    k(x, partial, out, sync, x.numel(), grid=blocks, block=256, cooperative=True)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full_like(out, x.sum().item()))
    with pytest.raises(ValueError, match=f"has {blocks + 1} blocks, but at most {blocks} blocks"):
        k(x, partial, out, sync, x.numel(), grid=blocks + 1, block=256, cooperative=True)


def driver_blocks_per_sm(func: int, threads: int, smem: int) -> int:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor called here through ctypes, not cupy_ops."""
    fn = ctypes.CDLL("libcuda.so.1").cuOccupancyMaxActiveBlocksPerMultiprocessor
    out = ctypes.c_int(-1)
    assert fn(ctypes.byref(out), ctypes.c_void_p(func), ctypes.c_int(threads), ctypes.c_size_t(smem)) == 0
    return out.value


@pytest.mark.gpu
@pytest.mark.parametrize(
    "code, name, block, smem",
    [
        (COPY, "copy", 256, 0),
        (COPY, "copy", 1024, 0),
        (COPY, "copy", 128, 100 * 1024),
        (SMEM, "smem40k", 128, 0),
        (SMEM, "smem40k", 256, 60 * 1024),
    ],
)
def test_occupancy_is_the_drivers(cuda, code, name, block, smem):
    k = cupy_ops.Kernel(code, name)
    occ = k.occupancy(block, smem)
    h = k.handle(None, 0)
    assert occ.blocks_per_sm == driver_blocks_per_sm(h.ptr, block, smem)
    props = torch.cuda.get_device_properties(0)
    assert occ.sms == props.multi_processor_count and occ.resident_blocks == occ.blocks_per_sm * occ.sms
    import cupy

    min_grid, suggested = cupy.cuda.driver.occupancyMaxPotentialBlockSize(h.ptr, smem, 0)
    assert (occ.suggested_block, occ.min_grid) == (suggested, min_grid)
    # the estimate autotune prunes with, from the offline report, agrees here
    r = k.compile_offline(device.arch(0))[0]
    estimate = device.estimated_blocks_per_sm(r.registers, block, (r.shared_bytes or 0) + smem, device.device_limits(0))
    assert estimate == occ.blocks_per_sm, (r.registers, r.shared_bytes)


@pytest.mark.gpu
def test_occupancy_of_a_per_dtype_template_and_of_clusters(cuda):
    k = cupy_ops.Kernel("template <class T> __global__ void k(T* y) { y[threadIdx.x] = T(1); }", "k")
    a = k.occupancy(256, dtype=torch.float64)
    assert a.blocks_per_sm == driver_blocks_per_sm(k.handle(torch.float64, 0).ptr, 256, 0)
    if torch.cuda.get_device_capability(0) >= (9, 0):
        assert k.occupancy(128, dtype=torch.float32, cluster=2).clusters >= 1


@pytest.mark.gpu
def test_stream_runs_the_kernel_on_that_stream(cuda):
    """A stream kept busy, then filled: the copy launched on it sees the fill; on the current
    stream it would run before the fill (the sleep keeps the side stream behind)."""
    import cupy

    k = cupy_ops.Kernel(COPY, "copy")
    n = 1 << 16
    k(torch.zeros(n, device=cuda), torch.zeros(n, device=cuda), n, grid=n // 256, block=256)  # compiled now
    torch.cuda.synchronize()
    for kind in ("torch", "int", "cupy"):
        side = torch.cuda.Stream(cuda)
        x = torch.zeros(n, device=cuda)
        y = torch.full((n,), -1.0, device=cuda)
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            x.fill_(5.0)
        stream = {"torch": side, "int": side.cuda_stream, "cupy": cupy.cuda.Stream.from_external(side)}[kind]
        k(x, y, n, grid=n // 256, block=256, stream=stream)
        assert not side.query(), "the side stream finished before the test could tell streams apart"
        side.synchronize()
        assert torch.equal(y, torch.full_like(y, 5.0)), kind


@pytest.mark.gpu
def test_a_stream_of_another_device_is_refused(two_gpus):
    k = cupy_ops.Kernel(COPY, "copy")
    x = torch.arange(1000, dtype=torch.float32, device="cuda:1")
    y = torch.zeros(1000, device="cuda:1")
    with pytest.raises(ValueError, match=r"stream is on cuda:0 but the kernel's arrays are on cuda:1"):
        k(x, y, 1000, grid=4, block=256, stream=torch.cuda.Stream("cuda:0"))
    raw = torch.cuda.Stream("cuda:0").cuda_stream
    if launch.stream_device(raw) is not None:  # drivers from CUDA 12.8 tell a raw stream's device
        with pytest.raises(ValueError, match=r"stream is on cuda:0"):
            k(x, y, 1000, grid=4, block=256, stream=raw)
    side = torch.cuda.Stream("cuda:1")
    k(x, y, 1000, grid=4, block=256, stream=side)
    side.synchronize()
    assert torch.equal(y, x)


@pytest.mark.gpu
def test_tensors_on_the_second_gpu_are_written_in_place(two_gpus):
    k = cupy_ops.Kernel(COPY, "copy")
    x = torch.arange(1000, dtype=torch.float32, device="cuda:1")
    y = torch.zeros(1000, device="cuda:1")
    with torch.cuda.device(0):
        k(x, y, 1000, grid=4, block=256)
    torch.cuda.synchronize(1)
    assert torch.equal(y, x) and torch.cuda.current_device() == 0


def test_cuLaunchKernelEx_gets_the_grid_the_stream_and_both_attributes(monkeypatch):
    """launch.launch's cluster / cooperative path up to the driver: the CUlaunchConfig it
    passes (read back field by field) and the attribute array it points at."""
    seen = []

    def launch_ex(cfg, func, params, extra):
        c = cfg._obj
        attrs = ctypes.cast(c.attrs, ctypes.POINTER(launch._LaunchAttribute))
        seen.append(
            (
                (c.gridDimX, c.gridDimY, c.gridDimZ),
                (c.blockDimX, c.blockDimY, c.blockDimZ),
                c.sharedMemBytes,
                c.hStream,
                [(attrs[i].id, attrs[i].x, attrs[i].y, attrs[i].z) for i in range(c.numAttrs)],
                func,
            )
        )
        return 0

    class Fn:
        ptr = 0xF00

    monkeypatch.setattr(launch, "_several_devices", False)
    monkeypatch.setattr(launch, "_launch_kernel_ex", launch_ex)
    h = launch.KernelHandle(Fn(), 0, ["ptr", "i32"], "k")
    launch.launch(h, (4, 2, 1), (32, 1, 1), [0, 7], 0, (2, 2, 1), stream=0x77, cooperative=True)
    launch.launch(h, (8, 1, 1), (64, 1, 1), [0, 7], 0, 1, stream=0x78, cooperative=True)
    assert seen == [
        ((4, 2, 1), (32, 1, 1), 0, 0x77, [(4, 2, 2, 1), (2, 1, 0, 0)], 0xF00),
        ((8, 1, 1), (64, 1, 1), 0, 0x78, [(2, 1, 0, 0)], 0xF00),
    ]
