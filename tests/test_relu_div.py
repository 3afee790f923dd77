"""relu_div / relu_div_ against torch.relu(x) / divisor, bit for bit."""
import numpy as np
import pytest
import torch

import cupy_ops
from conftest import ALL_DTYPES, assert_bitwise_equal, special_values
from test_relu import SHAPES, views

pytestmark = pytest.mark.gpu

DIVISORS = [2.0, 3.0, 0.1, 7, -1.5, 1e-30, 65504.0, 0.0, -0.0, float("inf"), float("nan")]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_relu_div_randn(shape, dtype, cuda):
    x = torch.randn(shape, device=cuda).to(dtype) * 4
    assert_bitwise_equal(cupy_ops.relu_div(x, 2.0), torch.relu(x) / 2.0)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("divisor", DIVISORS, ids=str)
def test_relu_div_divisors_and_special_values(divisor, dtype, cuda):
    vals = special_values(dtype, cuda)
    x = torch.cat([vals, torch.randn(4000, device=cuda).to(dtype)])
    for t in (x, x[1:]):
        assert_bitwise_equal(cupy_ops.relu_div(t, divisor), torch.relu(t) / divisor)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_div_divisor_kinds(dtype, cuda):
    x = torch.randn(1000, device=cuda).to(dtype)
    expected = torch.relu(x) / 3.0
    for d in (3, np.float32(3.0), np.float64(3.0), torch.tensor(3.0), torch.tensor([3.0], dtype=torch.float64)):
        assert_bitwise_equal(cupy_ops.relu_div(x, d), expected)
    for d in (torch.tensor(0.3, device=cuda), torch.tensor([0.3], device=cuda, dtype=torch.float64)):
        # a GPU divisor: torch divides truly (no reciprocal); so must we, without a host sync
        assert_bitwise_equal(cupy_ops.relu_div(x, d), torch.relu(x) / d.reshape(()))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_div_views_inplace_out(dtype, cuda):
    base = torch.randn(130, 67, device=cuda).to(dtype)
    for name, v in views(base).items():
        assert_bitwise_equal(cupy_ops.relu_div(v, 3.0), torch.relu(v) / 3.0)
    flat = torch.randn(5000, device=cuda).to(dtype)
    for off in range(9):
        y = flat.clone()[off:off + 4097]
        expected = torch.relu(y) / 0.7
        assert cupy_ops.relu_div_(y, 0.7) is y
        assert_bitwise_equal(y, expected)
    out = torch.empty_like(base)
    assert cupy_ops.relu_div(base, 2.0, out=out) is out
    assert_bitwise_equal(out, torch.relu(base) / 2.0)


def test_relu_div_divisor_errors(cuda):
    x = torch.randn(8, device=cuda)
    with pytest.raises(TypeError, match="divisor must be a real number"):
        cupy_ops.relu_div(x, "2")
    with pytest.raises(ValueError, match="one-element tensor"):
        cupy_ops.relu_div(x, torch.ones(2, device=cuda))
    with pytest.raises(RuntimeError, match="requires grad"):
        cupy_ops.relu_div_(torch.randn(8, device=cuda, requires_grad=True), 2.0)
    assert torch.equal(cupy_ops.relu_div(x, 2.0), torch.relu(x) / 2.0)


@pytest.mark.slow
def test_relu_div_more_than_2_31_elements(cuda):
    n = 2**31 + 17
    if torch.cuda.mem_get_info()[0] < 3 * 2 * n + 2**30:
        pytest.skip("needs about 13 GB of free GPU memory")
    x = torch.empty(n, device=cuda, dtype=torch.bfloat16)
    x.normal_()
    assert torch.equal(cupy_ops.relu_div(x, 2.0), torch.relu(x) / 2.0)
