"""Property-based correctness (hypothesis): generated shapes (0 and 1 sizes included),
layouts (offsets that break 16-byte alignment, transposes, steps) and values (randn at any
magnitude, NaN, +-inf, +-0.0, denormals) against torch. relu and relu_div must be bit-exact
(relu_div over divisors of every kind torch takes, log-uniform over 1e-30..1e30 and special);
matmul within its rounding-error bound. The fast suite draws 200 examples per op; the ones
marked slow, 1,000."""
import math

import numpy as np
import pytest
import torch

import cupy_ops
from conftest import HOPPER, assert_bitwise_equal
from test_matmul import ALGO_DTYPES, assert_gemm_close, roundoff

# the kernel families this GPU runs (algo="wgmma" only on Hopper; test_matmul reports its skip)
GEMM_ALGO_DTYPES = [(a, d) for a, d in ALGO_DTYPES if a != "wgmma" or HOPPER]

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (the test extra has it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.gpu
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
FAST = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(FAST, max_examples=1000)


def special(dtype):
    info = torch.finfo(dtype)
    return [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, info.tiny / 4, -info.tiny / 4,
            info.tiny, -info.tiny, info.max, -info.max, info.eps, -info.eps]


@st.composite
def tensors(draw, dtypes=DTYPES):
    """A CUDA tensor view: any dtype, 1-3 dims of size 0-33, misaligned offset, maybe
    transposed or strided, values from randn at a random scale with special values mixed in."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(st.lists(st.integers(0, 33), min_size=1, max_size=3))
    offset = draw(st.integers(0, 7))
    step = draw(st.sampled_from([1, 1, 2]))
    transpose = draw(st.booleans()) and len(shape) >= 2
    seed = draw(st.integers(0, 2**31 - 1))
    scale = 10.0 ** draw(st.integers(-40, 38))
    n_special = draw(st.integers(0, 8))
    rng = np.random.default_rng(seed)
    full = list(shape)
    full[0] = full[0] * step + offset
    vals = rng.standard_normal(int(np.prod(full))) * scale
    if vals.size:
        sp = special(dtype)
        idx = rng.integers(0, vals.size, n_special)
        vals[idx] = [sp[i % len(sp)] for i in rng.integers(0, len(sp), n_special)]
    base = torch.from_numpy(vals.reshape(full)).to(dtype).cuda()
    x = base[offset::step] if step > 1 or offset else base
    x = x[: shape[0]]
    return x.transpose(0, 1) if transpose else x


def check_relu(x):
    assert_bitwise_equal(cupy_ops.relu(x), torch.relu(x))


def check_relu_div(x, divisor):
    d, kind = divisor
    obj = as_kind(d, kind, x.device)
    assert_bitwise_equal(cupy_ops.relu_div(x, obj), torch.relu(x) / obj)


def as_kind(d: float, kind: str, device):
    """The divisor ``d`` as a Python float or int, a numpy scalar, or a tensor (CPU: 0-dim of
    the named dtype; CUDA: 0-dim float32)."""
    if kind == "int":
        return int(d) if math.isfinite(d) and abs(d) < 2**62 and int(d) else 1
    if kind.startswith("np."):
        with np.errstate(over="ignore"):
            return getattr(np, kind[3:])(d)
    if kind.startswith("cpu "):
        return torch.tensor(d, dtype=torch.float64).to(getattr(torch, kind[4:]))
    if kind == "cuda":
        return torch.tensor(d, device=device)
    return d


# torch's divisor kinds; values log-uniform over 1e-30..1e30 of both signs, any double, and the
# special ones: 0, -0, +-inf, NaN, subnormals (of fp32 and fp64) and values that once broke
DIVISORS = st.tuples(
    st.one_of(st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-40, -3e-42, 5e-324, 1e-310,
                               2.0, 3.0, 0.1, 1e-3, 7e-4, 65504.0]),
              st.builds(lambda e, s: s * 10.0 ** e, st.floats(-30, 30), st.sampled_from([-1.0, 1.0])),
              st.floats()),
    st.sampled_from(["float", "int", "np.float32", "np.float64", "cpu float64", "cpu float32",
                     "cpu float16", "cpu bfloat16", "cuda"]))


@FAST
@given(tensors())
def test_relu_property(x):
    check_relu(x)


@FAST
@given(tensors(), DIVISORS)
def test_relu_div_property(x, d):
    check_relu_div(x, d)


@st.composite
def gemm_operands(draw):
    algo, dtype = draw(st.sampled_from(GEMM_ALGO_DTYPES))
    M, K, N = (draw(st.integers(0, 70)) for _ in range(3))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M + 3, K + 3, device="cuda", generator=g).to(dtype)
    b = torch.randn(K + 3, N + 3, device="cuda", generator=g).to(dtype)
    oa, ob = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    a = a[oa:oa + M, :K] if not draw(st.booleans()) else a.t().contiguous()[:K, oa:oa + M].t()
    b = b[:K, ob:ob + N] if not draw(st.booleans()) else b.t().contiguous()[ob:ob + N, :K].t()
    return algo, a, b


@FAST
@given(gemm_operands())
def test_matmul_property(case):
    algo, a, b = case
    assert_gemm_close(cupy_ops.matmul(a, b, algo=algo), a, b, operand_roundoff=roundoff(algo, a.dtype))


@pytest.mark.slow
@SLOW
@given(tensors())
def test_relu_property_slow(x):
    check_relu(x)


@pytest.mark.slow
@SLOW
@given(tensors(), DIVISORS)
def test_relu_div_property_slow(x, d):
    check_relu_div(x, d)


@pytest.mark.slow
@SLOW
@given(gemm_operands())
def test_matmul_property_slow(case):
    algo, a, b = case
    assert_gemm_close(cupy_ops.matmul(a, b, algo=algo), a, b, operand_roundoff=roundoff(algo, a.dtype))
