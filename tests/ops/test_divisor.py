"""The divisor rule (ops/divisor.py) against exact arithmetic: the scale relu_div multiplies by is
torch's, the double reciprocal rounded to the compute type."""

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from cupy_ops.ops import divisor as _divisor

BINARY64 = (53, -1022, 1023)  # significand bits, least normal exponent, greatest exponent
BINARY32 = (24, -126, 127)
_F32_MAX, _F32_TINY, _F32_TRUE_MIN = float(np.finfo(np.float32).max), 2.0**-126, 2.0**-149
_rng_d = np.random.default_rng(20261127)


def round_to_nearest_even(q, fmt):
    """The exact value ``q`` (a Fraction; +-inf passes through) rounded to nearest, ties to
    even, in the binary format ``fmt``: a Fraction (0 where it underflows: the caller keeps
    the sign) or +-inf where it overflows."""
    if not isinstance(q, Fraction) or q == 0:
        return q
    p, emin, emax = fmt
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2^(e-1) < a < 2^(e+1)
    if Fraction(2) ** e > a:
        e -= 1  # now 2^e <= a < 2^(e+1)
    quantum = Fraction(2) ** (max(e, emin) - p + 1)  # below 2^emin: the subnormals' spacing
    n, rest = divmod(a, quantum)
    if 2 * rest > quantum or (2 * rest == quantum and n % 2):
        n += 1
    if n * quantum >= Fraction(2) ** (emax + 1):
        return math.inf if q > 0 else -math.inf
    return n * quantum if q > 0 else -n * quantum


def torch_reciprocal(d, dtype) -> float:
    """torch's multiplier for ``t / d``: from d's value as a double, +-inf for +-0, +-0 for
    +-inf, NaN for NaN, else 1 / d rounded to binary64 and, unless ``dtype`` is float64, then
    to binary32."""
    d = float(d)
    if math.isnan(d):
        return math.nan
    if d == 0.0:
        return math.copysign(math.inf, d)
    if math.isinf(d):
        return math.copysign(0.0, d)
    q = round_to_nearest_even(1 / Fraction(d), BINARY64)
    if dtype != torch.float64:
        q = round_to_nearest_even(q, BINARY32)
    return math.copysign(float(q) if q else 0.0, d)


def _same(got, want) -> bool:
    """Equal as IEEE values: NaN to NaN, -0.0 apart from +0.0."""
    if math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    return got == want and math.copysign(1.0, got) == math.copysign(1.0, want)


_OVERFLOW_TIE = float(1 / Fraction(2**128 - 2**103))  # 1 / d near the midpoint of fp32's max and 2^128


DIVISORS = (
    # log-uniform magnitudes over 1e-45..1e45, both signs
    [float(s * 10.0**e) for e, s in zip(_rng_d.uniform(-45, 45, 600), _rng_d.choice([-1.0, 1.0], 600))]
    # fp32's boundaries: the reciprocal overflows, reaches the largest finite value, the least
    # normal, the subnormals and their rounding to 0 (2^-150 is a tie: to even, 0)
    + [
        _F32_MAX,
        -_F32_MAX,
        1 / _F32_MAX,
        math.nextafter(1 / _F32_MAX, 0),
        math.nextafter(1 / _F32_MAX, 1),
        _F32_TINY,
        _F32_TRUE_MIN,
        -_F32_TRUE_MIN,
        2.0**-127,
        2.0**-128,
        -(2.0**-128),
        2.0**127,
        2.0**128,
        _OVERFLOW_TIE,
        math.nextafter(_OVERFLOW_TIE, 0),
        math.nextafter(_OVERFLOW_TIE, 1),
        -_OVERFLOW_TIE,
        2.0**149,
        1.5 * 2.0**149,
        2.0**150,
        math.nextafter(2.0**150, 0),
        math.nextafter(2.0**150, math.inf),
        1.25 * 2.0**150,
        2.0**151,
        -(2.0**151),
    ]
    # reciprocals that fall in fp32's subnormals: d over 2^126..2^128, both signs
    + [s * 2.0**126 * (1 + k / 64) for k in range(129) for s in (1.0, -1.0)]
    # reciprocals past double's range or in its subnormals
    + [5e-324, -5e-324, 2.0**-1022, 1e308, -1.7976931348623157e308]
    # the reciprocal in double lands on an fp32 tie, so rounding 1 / d straight to fp32 would differ
    + [0.6372658082104927, 0.5412914007013113, 0.9406392351008829, 0.7967688936918248]
    # the special values, everyday divisors, and the other kinds torch takes
    + [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0, 3.0, 0.1, 1e-3, 7e-4, 65504.0, 1e-30]
    + [7, -3, 2**70, True, False, np.float32(0.1), np.float64(1e-3), np.int64(3)]
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_scale_is_the_double_reciprocal_rounded_to_the_compute_type(dtype):
    # the reference's rounding agrees with the hardware's on doubles: CPython's float(Fraction)
    # for binary64, numpy's float32 cast (subnormals and overflow included) for binary32
    rng = np.random.default_rng(1)
    xs = [float(m * 2.0 ** int(e)) for m, e in zip(rng.uniform(1, 2, 400), rng.integers(-160, 135, 400))]
    with np.errstate(over="ignore"):
        for x in xs + [_F32_MAX, 2.0**128 - 2.0**103, 2.0**-150, 2.0**-150 * 1.5, 2.0**-149 * 2.5]:
            assert float(round_to_nearest_even(Fraction(x) / 3, BINARY64)) == float(Fraction(x) / 3), x
            assert float(round_to_nearest_even(Fraction(x), BINARY32)) == float(np.float32(x)), x
    wrong = []
    for d in DIVISORS:
        got, want = _divisor.scale_for(d, dtype), torch_reciprocal(d, dtype)
        if type(got) is not float or not _same(got, want):
            wrong.append(f"d = {d!r}: scale {got!r}, exact 1 / d rounded {want!r}")
    assert not wrong, f"{len(wrong)} of {len(DIVISORS)} divisors:\n" + "\n".join(wrong[:20])


@pytest.mark.parametrize("d, expected", [(0.0, np.inf), (-0.0, -np.inf), (np.inf, 0.0)])
def test_scale_special_divisors(d, expected):
    assert float(_divisor.scale_for(d, torch.float32)) == expected
    assert np.isnan(_divisor.scale_for(float("nan"), torch.float32))
