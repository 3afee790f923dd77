"""The pure planning functions (elementwise launch shape, the GEMM plan) and the host-side
divisor rounding: CPU logic, called directly, no globals patched."""
# --- the divisor rule, against exact arithmetic ---------------------------------------------
# torch computes t / d (d a number) as t * (1 / d), the reciprocal taken in double and rounded to
# the compute type: fp32 for float32 / float16 / bfloat16, fp64 for float64 (measured on an H200,
# docs/numerics.md#the-divisor). The reference below does not share the implementation's
# arithmetic: 1 / d is an exact Fraction, rounded to nearest even by hand into binary64 and then
# binary32, with IEEE 754's subnormals, overflow to inf, signed zeros and NaN.

import pytest
import torch

from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import Matrix

from gemm_plans import A100, ES, H100, colmajor, gplan, rowmajor

# --- the GEMM plan --------------------------------------------------------------------------


def test_auto_follows_dtype_torch_switches_and_gpu():
    assert gplan(512, 512, 512).family == "simt"  # fp32, TF32 off: full fp32
    assert gplan(512, 512, 512, tf32=True).family == "wgmma"  # TF32 allowed, Hopper
    assert gplan(512, 512, 512, tf32=True, dev=A100).family == "tc"  # elsewhere: mma.sync
    assert gplan(512, 512, 512, torch.bfloat16).family == "wgmma"
    assert gplan(512, 512, 512, torch.float16, dev=A100).family == "tc"
    assert gplan(512, 512, 512, torch.float64).family == "naive"
    assert gplan(65535 * 128 + 1, 4, 4).family == "naive"  # more row tiles than the grid holds


@pytest.mark.parametrize(
    "algo, dtype, dev, match",
    [
        ("simt", torch.float16, H100, "algo='simt' is the fp32 kernel; got torch.float16"),
        ("tc", torch.float64, H100, "algo='tc' takes float16, bfloat16 or float32"),
        ("wgmma", torch.bfloat16, A100, r"algo='wgmma' needs a Hopper GPU \(compute capability 9.0\); cuda:0 has 8.0"),
        ("tf32x3", torch.bfloat16, H100, "algo='tf32x3' is the fp32 kernel on TF32 tensor cores .*got torch.bfloat16"),
        ("tf32x3", torch.float32, A100, r"algo='tf32x3' needs a Hopper GPU .* has 8.0 \(use 'auto' or simt"),
    ],
)
def test_an_algo_that_cannot_take_the_problem_is_a_value_error(algo, dtype, dev, match):
    with pytest.raises(ValueError, match=match):
        gplan(64, 64, 64, dtype, dev=dev, algo=algo)
    with pytest.raises(ValueError, match=r"algo='simt' takes at most 8388480 rows \(M\), got 8388481"):
        gplan(65535 * 128 + 1, 4, 4, algo="simt")


@pytest.mark.parametrize("tf32", [False, True])
def test_accurate_ignores_the_tf32_switch(tf32):
    """algo="accurate" plans float32 on the fp32-accurate kernels whatever torch's TF32 switch
    says: fp16x3 from 2^33 multiply-adds on Hopper, tf32x3 below, simt elsewhere; never a TF32
    product (wgmma / tc); 16-bit as "auto" (the tensor cores)."""
    for M, K, N, hopper in (
        (4096, 4096, 4096, "fp16x3"),
        (2048, 2048, 2048, "fp16x3"),
        (2048, 2047, 2048, "tf32x3"),
        (1024, 1024, 1024, "tf32x3"),
        (3, 5, 7, "tf32x3"),
    ):
        assert gplan(M, K, N, algo="accurate", tf32=tf32).family == hopper, (M, K, N)
        assert gplan(M, K, N, algo="accurate", tf32=tf32, dev=A100).family == "simt", (M, K, N)
        assert gplan(M, K, N, algo="auto", tf32=tf32).family == ("wgmma" if tf32 else "simt")
    assert gplan(64, 64, 64, torch.bfloat16, algo="accurate", tf32=tf32).family == "wgmma"
    assert gplan(64, 64, 64, torch.bfloat16, algo="accurate", tf32=tf32, dev=A100).family == "tc"
    assert gplan(64, 64, 64, torch.float64, algo="accurate", tf32=tf32).family == "naive"


def test_every_kernel_a_plan_names_is_registered():
    registered = {f: set(v) for f, v in gemm.variants().items()}

    def layouts(r, c, dt):
        return [
            rowmajor(r, c, dt),
            colmajor(r, c, dt),
            Matrix(r, c, 3 * c, 3, ES[dt], True),
            rowmajor(r, c, dt, aligned=False),
        ]

    seen = set()
    for dev in (H100, A100):
        for dtype in ES:
            for algo in gemm.ALGOS:
                for M, K, N in [(1, 1, 1), (64, 0, 64), (256, 1024, 1024), (4096, 4096, 4096), (129, 3000, 130)]:
                    for a in layouts(M, K, dtype):
                        for b in layouts(K, N, dtype):
                            for epi in gemm.EPILOGUES:
                                for tf32 in (False, True):
                                    try:
                                        p = gemm.plan(M, N, K, dtype, a, b, epi, dev, algo=algo, tf32=tf32)
                                    except ValueError:
                                        continue
                                    assert p.kernel in registered[p.source], p
                                    assert p.reduce is None or p.reduce in registered["gemm.cu"], p
                                    seen.add(p.kernel)
    assert len(seen) >= 40  # the sweep reaches most variants
