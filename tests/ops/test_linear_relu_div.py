"""linear_relu_div (naive fused kernel) against relu(F.linear(x, w, b)) / d in fp64.

Tolerance as in test_matmul (Higham's gamma_{K+1} for the K products plus the bias), plus the
rounding of the Linear output to the dtype (torch rounds it before the ReLU) and of the
result: each one unit roundoff of the dtype. ReLU does not increase errors; the divide is
exact for the divisors used here (powers of two, and 3 with its fp32 reciprocal).
"""

import math

import pytest
import torch
import torch.nn.functional as F

import cupy_ops

from conftest import UNIT_ROUNDOFF, require_algo
from gemm_checks import accumulation_roundoff, general_path, roundoff, seeded_randn, spy_layers

pytestmark = pytest.mark.gpu


def check(x, w, b, d, algo="auto"):
    got = cupy_ops.linear_relu_div(x, w, b, d, algo=algo)
    dtype = x.dtype
    K = x.shape[1]
    lin = F.linear(x.double(), w.double(), None if b is None else b.double())
    ref = torch.relu(lin) / d
    u = accumulation_roundoff(dtype)
    gamma = (K + 1) * u / (1 - (K + 1) * u) + 2 * roundoff(algo, dtype)
    absprod = x.double().abs() @ w.double().abs().t() + (0 if b is None else b.double().abs())
    ud = UNIT_ROUNDOFF[dtype]
    tiny = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps  # absolute rounding of tiny results
    bound = (gamma * absprod + ud * lin.abs()) / abs(d) + 2 * ud * ref.abs() + 2 * u * ref.abs() + tiny
    assert got.shape == ref.shape and got.dtype == dtype
    err = (got.double() - ref).abs()
    assert (err <= bound).all(), f"worst error {err.max().item():.3g}"
    return got


from gemm_checks import ALGO_DTYPES  # noqa: E402


@pytest.mark.parametrize("algo, dtype", ALGO_DTYPES, ids=str)
@pytest.mark.parametrize(
    "M, K, N", [(1, 1, 1), (3, 5, 7), (128, 129, 127), (33, 4097, 65), (257, 64, 300), (0, 4, 3), (4, 0, 3)], ids=str
)
def test_linear_relu_div_shapes(M, K, N, algo, dtype, cuda):
    require_algo(algo)
    x = torch.randn(M, K, device=cuda).to(dtype)
    w = torch.randn(N, K, device=cuda).to(dtype)
    b = torch.randn(N, device=cuda).to(dtype)
    check(x, w, b, 2.0, algo)
    check(x, w, None, 3.0, algo)
    check(x, w, b, -0.5, algo)


@pytest.mark.parametrize("algo, dtype", ALGO_DTYPES, ids=str)
def test_linear_relu_div_strided(algo, dtype, cuda):
    require_algo(algo)
    x = torch.randn(70, 90, device=cuda).to(dtype)
    w = torch.randn(80, 95, device=cuda).to(dtype)
    b = torch.randn(160, device=cuda).to(dtype)
    check(x[1:, 2:], w[:, 5:][:, :88], b[::2], 2.0, algo)
    check(x.t().contiguous().t(), w.t().contiguous().t()[:, :90], b[:80], 0.5, algo)
    check(x[:, :80], w[:, :80].t().contiguous().t(), b[:80], 2.0, algo)  # W N-major (transposed copy)


# (without a bias the denormal is the product itself: only where CUDA cores form it, as
# tensor cores may flush one; with a bias it is the epilogue's sum, on every path)
DENORMAL_CASES = [(algo, dtype, True) for algo, dtype in ALGO_DTYPES] + [
    (algo, dtype, False) for algo, dtype in ALGO_DTYPES if algo in ("naive", "simt")
]


@pytest.mark.parametrize("algo, dtype, with_bias", DENORMAL_CASES, ids=str)
def test_linear_relu_div_keeps_denormals(algo, dtype, with_bias, cuda):
    """The epilogue does not flush denormals (the kernels build with -ftz=true), as torch
    does not: an exact product v = 2^(2e) plus a bias that cancels it down to half the dtype's
    smallest normal gives that denormal, bit for bit; without a bias (the epilogue adds -0.0)
    a product of two normals that is that denormal stays it."""
    require_algo(algo)
    half_tiny = torch.finfo(dtype).tiny / 2  # a denormal of the dtype
    if with_bias:
        e = math.frexp(torch.finfo(dtype).tiny)[1] // 2 + 3  # v = 2^(2e): 64 x the smallest normal
        x_val, w_val, b = 2.0**e, 2.0**e, torch.full((5,), -(2.0 ** (2 * e) - half_tiny), dtype=dtype, device=cuda)
        assert b[0].item() == -(2.0 ** (2 * e) - half_tiny)  # representable: the sum is exact
    else:
        x_val, w_val, b = 0.125, half_tiny * 8, None
    x = torch.full((3, 1), x_val, dtype=dtype, device=cuda)
    w = torch.full((5, 1), w_val, dtype=dtype, device=cuda)
    exact = torch.full((3, 5), half_tiny, dtype=dtype, device=cuda)
    assert torch.equal(torch.relu(F.linear(x, w, b)) / 1.0, exact)  # torch's layer: the specification
    got = cupy_ops.linear_relu_div(x, w, b, 1.0, algo=algo)
    assert torch.equal(got, exact), f"{got[0, 0].item()!r} != {half_tiny!r}"


def test_linear_relu_div_matches_module_at_kernelbench_tolerance(cuda):
    torch.manual_seed(0)
    lin = torch.nn.Linear(512, 256).to(cuda)
    x = torch.rand(64, 512, device=cuda)
    with torch.no_grad():
        expected = torch.relu(lin(x)) / 2.0
        got = cupy_ops.linear_relu_div(x, lin.weight, lin.bias, 2.0)
    assert torch.allclose(got, expected, atol=1e-4, rtol=1e-4)


def test_linear_relu_div_divisor_edge_cases(cuda):
    x = torch.randn(8, 16, device=cuda)
    w = torch.randn(4, 16, device=cuda)
    b = torch.randn(4, device=cuda)
    lin = F.linear(x, w, b)
    for d in (0.0, float("inf")):
        got = cupy_ops.linear_relu_div(x, w, b, d)
        expected = torch.relu(lin) / d
        assert torch.equal(got.isnan(), expected.isnan()) and torch.equal(got.isinf(), expected.isinf())
    with pytest.raises(ValueError, match="divisor must be a number or a 0-dim CPU tensor"):
        cupy_ops.linear_relu_div(x, w, b, torch.tensor(2.0, device=cuda))
    with pytest.raises(ValueError, match="weight must be on the same device as x"):
        cupy_ops.linear_relu_div(x, w.cpu(), b, 2.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_sign_of_a_zero_scale_survives_calls_at_the_same_addresses(dtype, cuda):
    """Divisors +inf and -inf give scales +0.0 and -0.0, which compare (and hash) equal: calls
    at the same addresses, one after the other, must still give torch's +0 and -0 bits (a
    launcher keeps packed arguments per address set and scale). Each call writes into the same
    ``out`` (the Hopper kernels' 16-bit plans store C through the TMA, whose map is per
    address)."""
    torch.manual_seed(0)
    x = torch.randn(256, 128, device=cuda, dtype=dtype)
    w = torch.randn(256, 128, device=cuda, dtype=dtype)
    b = torch.randn(256, device=cuda, dtype=dtype)
    linear_relu_div = cupy_ops.Op.declared("cupy_ops::linear_relu_div")
    out = torch.empty(256, 256, device=cuda, dtype=dtype)
    # a column-major weight makes weight.T row-major: the Hopper launcher's packed path
    for weight in (w, w.t().contiguous().t()):
        for d in (float("inf"), float("-inf"), float("inf"), float("-inf")):
            want = torch.relu(F.linear(x, weight, b)) / d
            linear_relu_div(x, weight, b, d, out=out)
            assert torch.equal(torch.signbit(out), torch.signbit(want)) and torch.equal(out, want), d


@pytest.mark.parametrize(
    "algo, dtype, M, K, N",
    [
        ("fp16x3", torch.float32, 256, 384, 512),
        ("fp16x3", torch.float32, 128, 8192, 256),  # split-K and its reduction
        ("auto", torch.bfloat16, 256, 384, 512),
        ("accurate", torch.float32, 64, 96, 80),
    ],
    ids=str,
)
def test_a_signature_seen_before_reads_each_calls_own_values(algo, dtype, M, K, N, cuda, monkeypatch):
    """``linear_relu_div`` and ``linear_relu`` by signature (``gemm.layer``) give, call after
    call, the general path's bits: new values at the same addresses, new tensors, int and
    float divisors, x of three dimensions, no bias."""
    require_algo(algo)
    rnd, entries = seeded_randn(cuda, dtype, M + K + N), spy_layers(monkeypatch)
    x, w, b = rnd(M, K), rnd(N, K), rnd(N)
    for i, d in enumerate((2.0, 3, 0.5, -4.0, 7, 1.0)):
        if i in (1, 4):
            x.copy_(rnd(M, K))
            w.copy_(rnd(N, K))
        if i == 2:
            x = rnd(M, K)
        args = (x.view(2, M // 2, K) if i == 3 else x, w, None if i == 5 else b)
        got, got_relu = cupy_ops.linear_relu_div(*args, d, algo=algo), cupy_ops.linear_relu(*args, algo=algo)
        assert len(entries) == 2 * (i + 1) and None not in entries[-2:]  # (this path took both)
        with general_path(monkeypatch):
            want, want_relu = cupy_ops.linear_relu_div(*args, d, algo=algo), cupy_ops.linear_relu(*args, algo=algo)
        assert torch.equal(got, want) and torch.equal(got_relu, want_relu), (i, d)
