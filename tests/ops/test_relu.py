"""relu / relu_ against torch.relu, bit for bit, over shapes, layouts and special values."""

import pytest
import torch

import cupy_ops

from conftest import ALL_DTYPES, assert_bitwise_equal, special_values
from elementwise_cases import SHAPES, views

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_relu_randn(shape, dtype, cuda):
    x = torch.randn(shape, device=cuda).to(dtype)
    assert_bitwise_equal(cupy_ops.relu(x), torch.relu(x))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_special_values(dtype, cuda):
    # NaN, +-inf, +-0.0, denormals, huge: tiled and shuffled so every alignment case sees them
    vals = special_values(dtype, cuda)
    x = vals.repeat(200)[torch.randperm(vals.numel() * 200, device=cuda)][:4097]
    for t in (x, x[1:], x[3:-2]):
        assert_bitwise_equal(cupy_ops.relu(t), torch.relu(t))
    assert_bitwise_equal(cupy_ops.relu(vals), torch.relu(vals))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_views(dtype, cuda):
    base = torch.randn(130, 67, device=cuda).to(dtype)
    for name, v in views(base).items():
        got = cupy_ops.relu(v)
        assert_bitwise_equal(got, torch.relu(v))
        if v.is_contiguous() or name == "x.t()":
            assert got.stride() == torch.relu(v).stride(), name  # same layout as torch's result
    x3 = torch.randn(4, 5, 6, device=cuda).to(dtype).permute(2, 0, 1)
    assert_bitwise_equal(cupy_ops.relu(x3), torch.relu(x3))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_every_alignment(dtype, cuda):
    flat = torch.randn(5000, device=cuda).to(dtype)
    for off in range(9):
        for n in (1, 7, 8, 9, 4097):
            x = flat[off : off + n]
            assert_bitwise_equal(cupy_ops.relu(x), torch.relu(x))  # fresh output: other alignment
            y = x.clone() if off == 0 else flat.clone()[off : off + n]  # in place: same alignment
            expected = torch.relu(y)
            assert cupy_ops.relu_(y) is y
            assert_bitwise_equal(y, expected)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_inplace_and_out(dtype, cuda):
    x = torch.randn(33, 65, device=cuda).to(dtype)
    expected = torch.relu(x)
    out = torch.full_like(x, 7.0)
    assert cupy_ops.relu(x, out=out) is out
    assert_bitwise_equal(out, expected)
    out_t = torch.full((65, 33), 7.0, device=cuda, dtype=dtype).t()  # other strides than x
    assert cupy_ops.relu(x, out=out_t) is out_t
    assert_bitwise_equal(out_t, expected)
    y = x.clone().t()  # in place on a non-contiguous view
    exp_t = torch.relu(y)
    assert cupy_ops.relu_(y) is y
    assert_bitwise_equal(y, exp_t)
    for view in (lambda t: t[:, ::2], lambda t: t.t()[1::3], lambda t: t[::2, 1:]):  # views with gaps
        base = x.clone()
        expected = base.clone()
        view(expected).relu_()
        z = view(base)
        assert cupy_ops.relu_(z) is z
        assert_bitwise_equal(base, expected)  # the view's elements, and nothing else of its base


def test_relu_out_errors(cuda):
    x = torch.randn(8, device=cuda)
    wrong = torch.empty(4, device=cuda)  # torch resizes a wrongly shaped out, warning that it had elements
    with pytest.warns(UserWarning, match="was resized"):
        assert cupy_ops.relu(x, out=wrong) is wrong
    assert_bitwise_equal(wrong, torch.relu(x))
    with pytest.raises(TypeError, match="out must have the same dtype as x"):
        cupy_ops.relu(x, out=torch.empty(8, device=cuda, dtype=torch.float16))
    with pytest.raises(ValueError, match="out must be on the same device as x"):
        cupy_ops.relu(x, out=torch.empty(8))
    with pytest.raises(TypeError, match=r"out must be a torch\.Tensor or None, got list"):
        cupy_ops.relu(x, out=[0.0])
    leaf = torch.randn(8, device=cuda, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        cupy_ops.relu_(leaf)
    assert torch.equal(cupy_ops.relu(x), torch.relu(x))  # still usable afterwards


def test_relu_requires_grad_input_is_read(cuda):
    x = torch.randn(100, device=cuda, requires_grad=True)
    assert torch.equal(cupy_ops.relu(x), torch.relu(x.detach()))


@pytest.mark.slow
def test_relu_more_than_2_31_elements(cuda):
    n = 2**31 + 17
    if torch.cuda.mem_get_info()[0] < 3 * 2 * n + 2**30:
        pytest.skip("needs about 13 GB of free GPU memory")
    x = torch.empty(n, device=cuda, dtype=torch.float16)
    x.normal_()
    y = cupy_ops.relu(x)
    assert torch.equal(y[-1000:], torch.relu(x[-1000:]))
    assert torch.equal(y, torch.relu(x))
