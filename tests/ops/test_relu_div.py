"""relu_div / relu_div_ against torch.relu(x) / divisor, bit for bit."""

import math

import numpy as np
import pytest
import torch

import cupy_ops

from conftest import ALL_DTYPES, assert_bitwise_equal, special_values
from elementwise_cases import MANY_DIVISORS, SHAPES, views

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


def divisor_kinds(d: float, device):
    """Every kind of divisor torch takes, holding (about) the value ``d``."""
    with np.errstate(over="ignore"):
        kinds = {"float": d, "np.float64": np.float64(d), "np.float32": np.float32(d)}
    if math.isfinite(d) and abs(d) < 2**62:
        kinds["int"] = int(d) or 1
    for dt in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        kinds[f"cpu {dt}"] = torch.tensor(d, dtype=torch.float64).to(dt)
    kinds["cuda 0-dim"] = torch.tensor(d, device=device)
    kinds["cuda float64 0-dim"] = torch.tensor(d, device=device, dtype=torch.float64)
    return kinds


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_div_is_bit_exact_for_every_divisor_kind_and_value(dtype, cuda):
    # torch multiplies by 1 / d taken in double then rounded (host divisors), or divides truly
    # (CUDA divisors); d = 1e-3 and 7e-4 once gave 37-46 % of fp32 results one ulp off
    x = torch.cat([special_values(dtype, cuda), torch.randn(4096, device=cuda).to(dtype) * 4])
    for d in MANY_DIVISORS:
        for kind, obj in divisor_kinds(d, cuda).items():
            expected = torch.relu(x) / obj
            got = cupy_ops.relu_div(x, obj)
            try:
                assert_bitwise_equal(got, expected)
            except AssertionError as e:
                raise AssertionError(f"divisor {d!r} as {kind}: {e}") from None


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_div_gpu_divisor_of_any_shape_and_dtype_promotes_as_torch(dtype, cuda):
    x = torch.randn(1000, device=cuda).to(dtype)
    for d in (
        torch.tensor(0.3, device=cuda),
        torch.tensor([0.3], device=cuda, dtype=torch.float64),
        torch.tensor([[0.3]], device=cuda, dtype=torch.float16),
        torch.tensor([3], device=cuda),
    ):
        expected = torch.relu(x) / d
        assert_bitwise_equal(cupy_ops.relu_div(x, d), expected)  # dtype and shape as torch's
        y = x.clone()
        if expected.shape != x.shape:
            with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
                cupy_ops.relu_div_(y, d)
            continue
        assert cupy_ops.relu_div_(y, d) is y
        assert_bitwise_equal(y, torch.relu(x).div_(d))
    x0 = torch.tensor(1.7, device=cuda).to(dtype)  # a 0-dim x: a 0-dim divisor promotes it
    for d in (torch.tensor(3.0, dtype=torch.float64), torch.tensor(3.0, device=cuda, dtype=torch.float64)):
        assert_bitwise_equal(cupy_ops.relu_div(x0, d), torch.relu(x0) / d)


def test_relu_div_cpu_divisor_with_dimensions_is_refused_as_torch_refuses_it(cuda):
    x = torch.randn(10, device=cuda)
    with pytest.raises(RuntimeError, match="same device"):
        torch.relu(x) / torch.tensor([2.0])
    with pytest.raises(ValueError, match="0-dim tensor"):
        cupy_ops.relu_div(x, torch.tensor([2.0]))
    with pytest.raises(ValueError, match="int64"):
        cupy_ops.relu_div(x, 2**64)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_relu_div_views_inplace_out(dtype, cuda):
    base = torch.randn(130, 67, device=cuda).to(dtype)
    for _name, v in views(base).items():
        assert_bitwise_equal(cupy_ops.relu_div(v, 3.0), torch.relu(v) / 3.0)
    flat = torch.randn(5000, device=cuda).to(dtype)
    for off in range(9):
        y = flat.clone()[off : off + 4097]
        expected = torch.relu(y) / 0.7
        assert cupy_ops.relu_div_(y, 0.7) is y
        assert_bitwise_equal(y, expected)
    out = torch.empty_like(base)
    assert cupy_ops.relu_div(base, 2.0, out=out) is out
    assert_bitwise_equal(out, torch.relu(base) / 2.0)
    for view in (lambda t: t[:, ::2], lambda t: t.t()[1::3], lambda t: t[::2, 1:]):  # views with gaps
        b = base.clone()
        expected = b.clone()
        view(expected).copy_(torch.relu(view(expected)) / 0.7)
        z = view(b)
        assert cupy_ops.relu_div_(z, 0.7) is z
        assert_bitwise_equal(b, expected)


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


BOOL_DIVISORS = {
    "True": True,
    "False": False,
    "np.bool_": np.bool_(True),
    "cpu bool tensor": torch.tensor(True),
}


@pytest.mark.parametrize("kind", list(BOOL_DIVISORS) + ["cuda bool tensor"])
@pytest.mark.parametrize("compiled", [False, True])
def test_a_bool_divisor_divides_by_0_or_1_as_torch_does(kind, compiled, cuda):
    """torch divides by a bool as by 0 or 1, whatever its kind (Python, numpy, CPU or CUDA
    tensor), eagerly and compiled; so does relu_div, bit for bit (np.bool_ was refused)."""
    torch.manual_seed(0)
    x = torch.randn(1000, device=cuda)
    d = BOOL_DIVISORS.get(kind, torch.tensor(True, device=cuda))
    want = torch.relu(x) / d
    f = (lambda t: cupy_ops.relu_div(t, d)) if not compiled else torch.compile(lambda t: cupy_ops.relu_div(t, d))
    got = f(x)
    assert got.dtype == want.dtype
    assert_bitwise_equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_out_of_a_wider_float_dtype_takes_the_cast_result_as_torchs_does(dtype, cuda):
    """``torch.div(torch.relu(x16), 2.0, out=f32)`` computes in x's dtype and casts on the store;
    relu_div does the same (``out=``, the registered ``relu_div_out``, a CUDA divisor), bit for
    bit; an integer ``out`` is torch's RuntimeError (a wider out was refused). relu's out= is
    clamp_min's, which refuses another dtype, as torch does."""
    torch.manual_seed(0)
    x = torch.randn(4096, device=cuda, dtype=dtype)
    for divisor in (2.0, 3, torch.tensor(7.0, device=cuda)):
        want = torch.empty(4096, device=cuda, dtype=torch.float32)
        torch.div(torch.relu(x), divisor, out=want)
        got = torch.empty(4096, device=cuda, dtype=torch.float32)
        assert cupy_ops.relu_div(x, divisor, out=got) is got
        assert_bitwise_equal(got, want)
    # relu's out= is torch.clamp_min's: its out must have the result's dtype, as there
    with pytest.raises(RuntimeError, match="Found dtype Double"):
        torch.clamp_min(x, 0, out=torch.empty(4096, device=cuda, dtype=torch.float64))
    with pytest.raises(TypeError, match="out must have the same dtype as x"):
        cupy_ops.relu(x, out=torch.empty(4096, device=cuda, dtype=torch.float64))
    got = torch.empty(4096, device=cuda, dtype=torch.float32)
    torch.ops.cupy_ops.relu_div_out(got, x, 2.0)
    assert_bitwise_equal(got, torch.div(torch.relu(x), 2.0).float())
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int") as theirs:
        torch.div(torch.relu(x), 2.0, out=torch.empty(4096, device=cuda, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int") as ours:
        cupy_ops.relu_div(x, 2.0, out=torch.empty(4096, device=cuda, dtype=torch.int32))
    assert str(ours.value) == str(theirs.value)
