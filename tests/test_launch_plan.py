"""Grid sizing, layout detection and the host-side divisor rounding (pure CPU logic)."""
import numpy as np
import pytest
import torch

from cupy_ops import launch
from cupy_ops.ops import _divisor


@pytest.mark.parametrize("n, itemsize, x_off, y_off, expect_vec, expect_head", [
    (1000, 4, 0, 0, 1, 0),      # both aligned: vectors from the first element
    (1000, 4, 4, 4, 1, 3),      # both at +4 bytes (x[1:] in place): 3 scalars reach 16
    (1000, 2, 2, 2, 1, 7),      # fp16 at +2 bytes: 7 scalars
    (2, 4, 4, 4, 1, 2),         # head never exceeds n
    (1000, 4, 4, 0, 0, 0),      # different alignment (x[1:] into a fresh y): scalar loop
    (1000, 8, 8, 8, 1, 1),      # float64 at +8
])
def test_elementwise_plan_alignment(n, itemsize, x_off, y_off, expect_vec, expect_head):
    base = 1 << 20
    blocks, head, vec = launch.elementwise_plan(n, itemsize, base + x_off, base + y_off, sm_count=132)
    assert (vec, head) == (expect_vec, expect_head)
    assert (base + x_off + head * itemsize) % 16 == 0 or vec == 0 or head == n
    assert blocks >= 1


def test_elementwise_plan_grid_is_capped_by_the_device_not_the_size():
    blocks, _, _ = launch.elementwise_plan(4096 * 393216, 4, 0, 0, sm_count=132)
    assert blocks == 132 * launch.ELEMENTWISE_BLOCKS_PER_SM
    blocks, _, _ = launch.elementwise_plan(4096 * 393216, 4, 0, 0, sm_count=108)
    assert blocks == 108 * launch.ELEMENTWISE_BLOCKS_PER_SM
    # small tensors: one thread per vector, no idle blocks
    blocks, _, _ = launch.elementwise_plan(4096, 4, 0, 0, sm_count=132)
    assert blocks == 4096 // 4 // launch.ELEMENTWISE_THREADS


def test_elementwise_plan_covers_every_element():
    for n in [1, 3, 4, 5, 127, 128, 129, 4097]:
        for off in range(0, 16, 4):
            blocks, head, vec = launch.elementwise_plan(n, 4, 64 + off, 64 + off, sm_count=2)
            threads = blocks * launch.ELEMENTWISE_THREADS
            assert threads >= head and threads >= 3  # head and tail are one element per thread
            if vec:
                nvec = (n - head) // 4
                assert head + nvec * 4 + (n - head - nvec * 4) == n


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
