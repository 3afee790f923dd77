"""The launch's argument packing (cupy_ops/kernel/packing.py): the packer generated for a kernel's
common case agrees with the checking ``pack`` wherever it answers, and declines (None) wherever
``pack`` would raise or convert, on every mix of arguments below. CPU: CUDA tensors are stood
in for by ``conftest.OnDevice``."""

import random

import numpy as np
import pytest
import torch

import cupy_ops
from cupy_ops.kernel import packing

from conftest import OnDevice
from conftest import on_device as on

SCALARS = r"""
__global__ void scalars(float* y, float f, double d, int i, unsigned u, long long ll, unsigned long long ull,
                        bool b, short s) { }
"""
SCALE = r"""
template <class T>
__global__ void scale(const T* x, T* y, float s, long long n) { }
"""
HALF = r"""
template <class T>
__global__ void axpy(T a, const T* x, T* y, int n) { }
"""


def _ptrs():
    two = on(0, 16)
    return [
        on(0),
        on(0, dtype=torch.float64),
        on(0, dtype=torch.float16),
        on(1),
        two[::2],  # not contiguous
        None,
        torch.zeros(8),  # a plain CPU tensor: not the stand-in class
        torch._neg_view(on(0)).as_subclass(OnDevice),  # contiguous, its memory negated
    ]


NUMBERS = [0, -1, 7, 2**31 - 1, 2**31, 2**32 - 1, 2**32, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64]
NUMBERS += [-(2**63), -(2**63) - 1, True, 1.5, -0.0, float("inf"), float("nan"), 3.5e38, 3.4e38, np.float32(2), "1"]
FLOATS = [1.5, -0.0, 3.4e38, -3.4028234663852886e38, 2.0**-149]
INTS = [0, -1, 7, 1, 2**15 - 1, 2**31 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1, -(2**63)]


def _outcome(k, plan, args):
    try:
        return packing.pack(k.name, plan, args, k._template)
    except (TypeError, ValueError):
        return "raised"


@pytest.mark.parametrize("source, name", [(SCALARS, "scalars"), (SCALE, "scale")])
def test_the_generated_packer_agrees_with_pack_or_declines(source, name):
    k = cupy_ops.Kernel(source, name)
    plan = k._arg_plan()
    fast = packing.fast(plan, k._template, OnDevice)
    assert fast is not None
    pools = [_ptrs() if p.kind == "ptr" else NUMBERS for p in plan]
    typical = [
        [on(0)]
        if p.kind == "ptr"
        else FLOATS
        if p.kind in ("f32", "f64")
        else [v for v in INTS if p.limits[0] <= v <= p.limits[1]]
        for p in plan
    ]
    rng = random.Random(0)
    mixes = [tuple(rng.choice(pool) for pool in pools) for _ in range(2000)]
    for _ in range(3000):  # typical arguments, one of them (at times) from the whole pool
        args = [rng.choice(pool) for pool in typical]
        i = rng.randrange(2 * len(args))
        if i < len(args):
            args[i] = rng.choice(pools[i])
        mixes.append(tuple(args))
    answered = 0
    for args in mixes:
        got = fast(args)
        if got is not None:
            answered += 1
            want = _outcome(k, plan, args)
            assert want != "raised" and (got[0], got[1], list(got[2])) == (want[0], want[1], list(want[2])), args
    assert answered > 300  # the common case is taken


def test_a_values_slot_is_packed_as_pack_packs_it():
    """The C types' edges: unsigned 32-bit slots wrap as pack wraps them, unsigned long long
    past 2^63 as its signed slot."""
    k = cupy_ops.Kernel(SCALARS, "scalars")
    plan = k._arg_plan()
    fast = packing.fast(plan, k._template, OnDevice)
    args = (on(0), 1.5, 2.5, -(2**31), 2**32 - 1, -(2**63), 2**64 - 1, 1, -32768)
    assert fast(args)[2] == packing.pack(k.name, plan, args, k._template)[2]
    assert fast(args)[2][1:] == [1.5, 2.5, 2**31, 2**32 - 1, -(2**63), -1, 1, 2**32 - 32768]


def test_kinds_it_does_not_take_go_through_pack():
    """A template's own type as a scalar (T a), or no pointer at all: no generated packer."""
    k = cupy_ops.Kernel(HALF, "axpy")
    assert packing.fast(k._arg_plan(), k._template) is None
    k = cupy_ops.Kernel("__global__ void f(int n) { }", "f")
    assert packing.fast(k._arg_plan(), k._template) is None


def test_a_kernel_call_with_a_stand_in_takes_pack_and_its_errors(monkeypatch):
    """The stand-in class is not torch.Tensor: a Kernel's own packer declines it, so the checks
    and their messages are pack's (tests/kernel/test_arguments.py)."""
    k = cupy_ops.Kernel(SCALE, "scale")
    k._arg_plan()
    assert k._fast is not None and k._fast((on(0), on(0), 1.0, 8)) is None
