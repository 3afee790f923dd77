"""Shared by the elementwise op tests: shapes and views that break kernels, and divisors of every magnitude."""

import math

import numpy as np

SHAPES = [(0,), (1,), (3,), (127,), (128,), (129,), (4097,), (33, 65), (2, 0, 3), (3, 5, 7, 11)]


def views(base):
    """Layouts that break naive kernels: misaligned offsets, transposes, gaps, permutations."""
    return {
        "x[1:]": base[1:],
        "x[:, 1:]": base[:, 1:],
        "x.t()": base.t(),
        "x[::2]": base[::2],
        "x[:, ::3]": base[:, ::3],
        "x.t()[1:]": base.t()[1:],
        "expand": base[:1].expand(5, -1),
    }


# log-uniform magnitudes over 1e-30..1e30, both signs, and the special ones (the probe that
# established torch's rule used the same spread: docs/numerics.md#the-divisor)
_rng = np.random.default_rng(11)


MANY_DIVISORS = list(10.0 ** _rng.uniform(-30, 30, 60) * _rng.choice([-1.0, 1.0], 60)) + [
    1e-3,
    7e-4,
    0.0,
    -0.0,
    math.inf,
    -math.inf,
    math.nan,
    1e-40,
    -3e-42,
    1e-310,
    5e-324,
    3e38,
    1e39,
]
