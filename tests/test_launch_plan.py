"""Grid sizing, layout detection and the host-side divisor rounding (pure CPU logic)."""
import numpy as np
import pytest
import torch

from cupy_ops import launch
from cupy_ops.ops import _divisor


def plan(n, itemsize, *ptrs):
    """(blocks, head, vec) that launch_elementwise passes to the kernel (launch captured)."""
    seen = {}

    class Handle:
        device, ptr = 0, 1234

        def __init__(self):
            self.pack = lambda storage, offset, *args: seen.update(args=args)

        def buffers(self):
            return None, 0, None

    def capture(fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        seen.update(blocks=gx, threads=bx)

    saved = launch._driver_launch, launch._raw_stream, launch._several_devices
    launch._driver_launch, launch._raw_stream, launch._several_devices = capture, (lambda d: 0), False
    try:
        launch.launch_elementwise(Handle(), n, itemsize, ptrs)
    finally:
        launch._driver_launch, launch._raw_stream, launch._several_devices = saved
    args = seen["args"]
    assert args[:len(ptrs)] == ptrs and args[len(ptrs)] == n and seen["threads"] == launch.ELEMENTWISE_THREADS
    return seen["blocks"], args[len(ptrs) + 1], args[len(ptrs) + 2]


@pytest.mark.parametrize("n, itemsize, x_off, y_off, expect_vec, expect_head", [
    (1000, 4, 0, 0, 1, 0),      # both aligned: vectors from the first element
    (1000, 4, 4, 4, 1, 3),      # both at +4 bytes (x[1:] in place): 3 scalars reach 16
    (1000, 2, 2, 2, 1, 7),      # fp16 at +2 bytes: 7 scalars
    (2, 4, 4, 4, 1, 2),         # head never exceeds n
    (1000, 4, 4, 0, 0, 0),      # different alignment (x[1:] into a fresh y): scalar path
    (1000, 8, 8, 8, 1, 1),      # float64 at +8
])
def test_elementwise_plan_alignment(n, itemsize, x_off, y_off, expect_vec, expect_head):
    base = 1 << 20
    blocks, head, vec = plan(n, itemsize, base + x_off, base + y_off)
    assert (vec, head) == (expect_vec, expect_head)
    if vec and head < n:
        assert (base + x_off + head * itemsize) % 16 == 0
    assert blocks >= 1


def test_elementwise_plan_binary_needs_all_three_aligned():
    assert plan(1000, 4, 16, 32, 48)[2] == 1
    assert plan(1000, 4, 16, 36, 48)[2] == 0
    assert plan(1000, 4, 20, 36, 52) == (plan(1000, 4, 20, 36)[0], 3, 1)


def test_elementwise_plan_one_block_per_chunk():
    chunk = launch.ELEMENTWISE_THREADS * launch.ELEMENTWISE_VECS_PER_THREAD * 16  # bytes per block
    blocks, _, _ = plan(4096 * 393216, 4, 0, 0)
    assert blocks == 4096 * 393216 * 4 // chunk           # KernelBench ReLU: 1.57 M blocks
    blocks, _, _ = plan(3, 4, 0, 0)
    assert blocks == 1                                     # no full vector: block 0 does head/tail
    blocks, _, _ = plan(2**31 + 17, 2, 0, 2)               # misaligned, > 2**31 elements
    assert blocks == -(-(2**31 + 17) // (launch.ELEMENTWISE_THREADS * 8))


def test_elementwise_plan_covers_every_element():
    chunk = launch.ELEMENTWISE_THREADS * launch.ELEMENTWISE_VECS_PER_THREAD * 16
    for n in [1, 3, 4, 5, 127, 128, 129, 4097, 100003]:
        for itemsize in (2, 4, 8):
            for off in range(0, 16, itemsize):
                for y_off in (off, 0):
                    blocks, head, vec = plan(n, itemsize, 64 + off, 64 + y_off)
                    if vec:
                        vecs = (n - head) * itemsize // 16
                        tail = n - head - vecs * 16 // itemsize
                        assert head < 16 // itemsize and tail < 16 // itemsize
                        assert head <= launch.ELEMENTWISE_THREADS and blocks * chunk >= vecs * 16
                    else:
                        assert blocks * launch.ELEMENTWISE_THREADS * 8 >= n


def test_gemm_naive_grid():
    grid, block = launch.gemm_naive_grid(1024, 8192)
    assert block == (16, 16, 1) and grid == (512, 64, 1)
    grid, _ = launch.gemm_naive_grid(10**7, 3)  # gridDim.y is capped at 65535; the kernel loops over m
    assert grid == (1, 65535, 1)


def test_is_dense():
    x = torch.empty(4, 6)
    assert launch.is_dense(x)
    assert launch.is_dense(x.t())
    assert launch.is_dense(torch.empty(2, 3, 4).permute(2, 0, 1))
    assert launch.is_dense(torch.empty(4, 1, 6)[:, :, :])
    assert not launch.is_dense(x[:, 1:])
    assert not launch.is_dense(x[::2])
    assert launch.is_dense(x[1:])  # offset views are still one block
    assert not launch.is_dense(torch.empty(3).expand(4, 3))  # overlapping


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("d", [2.0, 3.0, 0.1, 7, 1e-3, 65504.0, 1e6, 1e-30])
def test_scale_is_the_reciprocal_in_the_compute_type(dtype, d):
    # torch computes t / d as t * (1 / d), the reciprocal in the compute type (fp32 for the
    # 16-bit types and float32, fp64 for float64); d is not rounded to a 16-bit dtype first.
    compute = np.float64 if dtype == torch.float64 else np.float32
    assert _divisor.scale_for(d, dtype) == float(compute(1.0) / compute(d))


@pytest.mark.parametrize("d, expected", [(0.0, np.inf), (-0.0, -np.inf), (np.inf, 0.0)])
def test_scale_special_divisors(d, expected):
    assert float(_divisor.scale_for(d, torch.float32)) == expected
    assert np.isnan(_divisor.scale_for(float("nan"), torch.float32))
