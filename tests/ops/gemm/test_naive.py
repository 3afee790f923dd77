"""algo="naive" (one thread per output, any strides, 64-bit sizes): sizes past 32 bits, planned and computed."""

import pytest
import torch

import cupy_ops
from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import Matrix

from gemm_plans import H100


def test_sizes_past_32_bits_take_the_64_bit_kernel_or_are_refused_by_name():
    # stride-0 operands: no memory needed, the plan sees only shapes and strides
    big = 2**31
    wide_a, wide_b = Matrix(1, big, 0, 0, 4, True), Matrix(big, 1, 0, 0, 4, True)
    assert gemm.plan(1, 1, big, torch.float32, wide_a, wide_b, "EpiNone", H100).family == "naive"
    assert (
        gemm.plan(
            1, big, 1, torch.bfloat16, Matrix(1, 1, 1, 1, 2, True), Matrix(1, big, 0, 0, 2, True), "EpiNone", H100
        ).family
        == "naive"
    )
    huge = 2**32 + 16
    assert (
        gemm.plan(
            1, 1, huge, torch.float32, Matrix(1, huge, 0, 0, 4, True), Matrix(huge, 1, 0, 0, 4, True), "EpiNone", H100
        ).family
        == "naive"
    )
    for algo in ("simt", "tc", "wgmma"):
        with pytest.raises(
            ValueError,
            match=rf"algo='{algo}' takes K up to 2147483647 \(32-bit sizes\), got "
            r"K = 2147483648",
        ):
            gemm.plan(1, 1, big, torch.float32, wide_a, wide_b, "EpiNone", H100, algo=algo)
    assert gemm.plan(1, 1, big - 1, torch.float32, wide_a, wide_b, "EpiNone", H100).family == "simt"


@pytest.mark.slow
def test_sizes_past_32_bits_are_computed_in_64_bit_or_refused_by_name(cuda):
    """K = 2**31 from stride-0 operands (no memory): the tiled kernels (32-bit sizes) refuse it
    naming K; "auto" takes the naive kernel, whose sizes and indices are 64-bit: the float64
    sum of 2**31 ones is exact (one thread adds them: ~10 s)."""
    K = 2**31
    ones = lambda *shape, dtype=torch.float32: torch.ones(1, 1, device=cuda, dtype=dtype).expand(*shape)  # noqa: E731
    for algo in ("simt", "tc", "wgmma", "tf32x3", "fp16x3"):
        with pytest.raises(ValueError, match=rf"algo='{algo}' takes K up to 2147483647 \(32-bit sizes\), got K"):
            cupy_ops.matmul(ones(1, K), ones(K, 1), algo=algo)
    assert cupy_ops.gemm_plan(ones(1, K), ones(K, 1)).family == "naive"
    assert cupy_ops.gemm_plan(ones(1, 1), ones(1, K)).family == "naive"  # N = 2**31
    assert cupy_ops.matmul(ones(1, K, dtype=torch.float64), ones(K, 1, dtype=torch.float64)).item() == float(K)
