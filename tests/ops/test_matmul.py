"""matmul (naive kernel) against an fp64 reference, with a rigorous rounding-error bound.

Tolerance: summing K products in precision u (fp32 accumulation: u = 2**-24; fp64: 2**-53)
errs by at most gamma_K = K*u / (1 - K*u) times sum_k |a_mk| |b_kn| (Higham, Accuracy and
Stability of Numerical Algorithms, sect. 3.1); rounding the result to the output dtype adds
one unit roundoff of that dtype times |c|. A wrong index or a missed term errs by O(|c|).
"""

import pytest
import torch

import cupy_ops

from conftest import HOPPER, require_algo
from gemm_checks import ALGO_DTYPES, TF32_ROUNDOFF, assert_gemm_close, roundoff

pytestmark = pytest.mark.gpu

SHAPES = [
    (1, 1, 1),
    (3, 5, 7),
    (127, 129, 128),
    (129, 128, 127),
    (64, 4097, 33),
    (257, 31, 4097),
    (0, 5, 3),
    (5, 3, 0),
    (5, 0, 3),
]


@pytest.mark.parametrize("algo, dtype", ALGO_DTYPES, ids=str)
@pytest.mark.parametrize("M, K, N", SHAPES, ids=str)
def test_matmul_shapes(M, K, N, algo, dtype, cuda):
    require_algo(algo)
    a = torch.randn(M, K, device=cuda).to(dtype)
    b = torch.randn(K, N, device=cuda).to(dtype)
    c = cupy_ops.matmul(a, b, algo=algo)
    assert c.shape == (M, N) and c.dtype == dtype and c.is_contiguous()
    assert_gemm_close(c, a, b, operand_roundoff=roundoff(algo, dtype))
    if K == 0:
        assert torch.equal(c, torch.zeros_like(c))


@pytest.mark.parametrize("algo, dtype", ALGO_DTYPES, ids=str)
def test_matmul_strided_operands(algo, dtype, cuda):
    require_algo(algo)
    big_a = torch.randn(150, 140, device=cuda).to(dtype)
    big_b = torch.randn(140, 160, device=cuda).to(dtype)
    cases = {
        "a.t(), b.t()": (big_a[:129, :129].t(), big_b[:129, :127].t().t()),
        "slices": (big_a[1:, 3:130], big_b[2:129, 5:]),
        "steps": (big_a[::2, ::3][:, :40], big_b[::3, ::2][:40]),
        "b transposed": (big_a[:33, :77], big_b.t()[:77, :65].contiguous().t().t()),
        "a.t() of slice": (big_a[:, 1:].t()[:, :140], big_b[:140, 1:]),
        "misaligned rows": (big_a[:, 1:130], big_b[1:130, 3:]),
        "size-1 dims": (big_a[:1, :77], big_b[:77, :1]),
        "column of a.t()": (big_a[:1, :].t(), big_b[:1, :]),
    }
    for _name, (a, b) in cases.items():
        c = cupy_ops.matmul(a, b, algo=algo)
        assert_gemm_close(c, a, b, operand_roundoff=roundoff(algo, dtype))


@pytest.mark.parametrize("algo", ["naive", "simt"])
def test_matmul_agrees_with_torch_at_kernelbench_tolerance(algo, cuda):
    torch.manual_seed(0)
    a = torch.rand(1024, 1024, device=cuda)
    b = torch.rand(1024, 1024, device=cuda)
    assert torch.allclose(cupy_ops.matmul(a, b, algo=algo), torch.matmul(a, b), atol=1e-4, rtol=1e-4)


def test_matmul_algo_errors(cuda):
    a = torch.randn(8, 8, device=cuda, dtype=torch.float16)
    with pytest.raises(ValueError, match="algo='simt' is the fp32 kernel"):
        cupy_ops.matmul(a, a, algo="simt")


def test_matmul_nan_and_inf_propagate(cuda):
    a = torch.randn(4, 6, device=cuda)
    b = torch.randn(6, 5, device=cuda)
    a[1, 2] = float("nan")
    b[3, 4] = float("inf")
    c, ref = cupy_ops.matmul(a, b), torch.matmul(a, b)
    assert torch.equal(c.isnan(), ref.isnan()) and torch.equal(c.isinf(), ref.isinf())


def test_matmul_device_errors(cuda):
    a = torch.randn(4, 6, device=cuda)
    with pytest.raises(ValueError, match="b must be on the same device as a"):
        cupy_ops.matmul(a, torch.randn(6, 5))


def test_tf32_follows_torchs_switches(cuda):
    old = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    a = torch.randn(300, 200, device=cuda)
    b = torch.randn(200, 100, device=cuda)
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        tc = "wgmma" if HOPPER else "tc"
        assert cupy_ops.gemm_plan(a, b).family == "simt"
        assert cupy_ops.gemm_plan(a.bfloat16(), b.bfloat16()).family == tc
        torch.set_float32_matmul_precision("high")
        assert cupy_ops.gemm_plan(a, b).family == tc
        torch.set_float32_matmul_precision("highest")
        torch.backends.cuda.matmul.allow_tf32 = True
        assert cupy_ops.gemm_plan(a, b).family == tc
        assert_gemm_close(cupy_ops.matmul(a, b), a, b, operand_roundoff=TF32_ROUNDOFF)
        # KernelBench's own check of a TF32 result against torch's TF32 result
        assert torch.allclose(cupy_ops.matmul(a, b), a @ b, atol=1e-2, rtol=1e-2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old[0]
        torch.set_float32_matmul_precision(old[1])


@pytest.mark.parametrize("algo", ["tc", "wgmma"])
def test_tf32_operands_are_rounded_to_nearest_as_torch_does(algo, cuda):
    """With K = 8, each product of two TF32 values is exact, so the result shows how the
    operands were rounded: to nearest (torch's cuBLAS, cvt.rna, the TMA's TFLOAT32 load), not
    truncated (what the tensor cores do with raw fp32 bits; errs ~2**-11 relative, far above
    the fp32 summation error of 8 terms checked here)."""
    require_algo(algo)
    torch.manual_seed(0)
    a = torch.randn(256, 8, device=cuda)
    b = torch.randn(8, 300, device=cuda)

    def rna(x):  # half a TF32 ulp added to the magnitude bits, then the 13 low bits dropped
        return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)

    prods = rna(a).double().unsqueeze(2) * rna(b).double().unsqueeze(0)  # exact products
    ref, absum = prods.sum(1), prods.abs().sum(1)
    bound = 8 * 2.0**-24 * absum + 1e-30
    got = cupy_ops.matmul(a, b, algo=algo).double()
    assert ((got - ref).abs() <= bound).all(), f"worst {(got - ref).abs().max().item():.3g}"
    lin = cupy_ops.linear_relu_div(a, b.t(), None, 1.0, algo=algo).double()
    assert ((lin - torch.relu(ref)).abs() <= bound).all()


def test_tiled_algos_name_their_row_limit(cuda):
    """The tiled kernels' grids hold 65535 row tiles of 128: more rows asked of them by name is
    a ValueError naming M; "auto" takes the naive kernel there."""
    a = torch.zeros(65535 * 128 + 1, 1, device=cuda)
    b = torch.ones(1, 2, device=cuda)
    for algo in ("simt", "tc", "wgmma", "tf32x3", "fp16x3"):
        with pytest.raises(ValueError, match=rf"algo='{algo}' takes at most 8388480 rows \(M\), got 8388481"):
            cupy_ops.matmul(a, b, algo=algo)
    c = cupy_ops.matmul(a[-5:] + 1, b)
    assert torch.equal(c, torch.ones(5, 2, device=cuda))
    assert torch.equal(cupy_ops.matmul(a, b)[-3:], torch.zeros(3, 2, device=cuda))
