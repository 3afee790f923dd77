"""Property-based correctness (hypothesis) against torch.

- relu and relu_div are bit-exact, on tensors whose values are drawn from the dtype's whole
  representable range: random bit patterns (normals of every exponent, subnormals, +-inf and
  NaNs with payloads, each in the proportion the encoding gives them), normals at a scale drawn
  from the dtype's own exponent range, and the special values; in views (offsets that break
  16-byte alignment, transposes, steps); relu_div over divisors of every kind torch takes.
- matmul is within its rounding-error bound, at sizes drawn across the tile and split
  boundaries up to a few thousand (0 and 1 included), in four regimes that between them reach
  every branch of the plan (``test_the_gemm_sizes_reach_every_branch_of_the_plan``, on the
  CPU), operands in row-major, transposed, offset and stepped views, values randn scaled per
  row / column by powers of two drawn from a window the dtype holds (the product stays finite:
  the bound has no room for inf), zeros, -0.0 and the dtype's subnormals mixed in. NaN and inf
  through the GEMMs: test_matmul.py, test_tf32x3.py, test_fp16x3.py.
- tf32x3 and fp16x3 stay within 2^-18 of the largest output at any drawn shape (K up to 4096).

Only the kernel families the GPU runs are drawn (``runnable``: the Hopper families need compute
capability 9.0). The fast suite draws 200 examples per property (100 for the large GEMMs); the
ones marked slow, 1,000.
"""

import functools
import math

import numpy as np
import pytest
import torch

import cupy_ops
from cupy_ops.ops import gemm

from conftest import GPU_REASON, assert_bitwise_equal
from gemm_checks import ALGO_DTYPES, assert_gemm_close, roundoff, shifted
from gemm_plans import A100, H100, branch

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (the test extra has it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

gpu = pytest.mark.gpu
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
FAST = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
GEMM_FAST = settings(FAST, max_examples=100)
SLOW = settings(FAST, max_examples=1000)
INT = {
    torch.float16: (np.int16, torch.int16),
    torch.bfloat16: (np.int16, torch.int16),
    torch.float32: (np.int32, torch.int32),
    torch.float64: (np.int64, torch.int64),
}


def special(dtype):
    info = torch.finfo(dtype)
    return [
        math.nan,
        -math.nan,
        math.inf,
        -math.inf,
        0.0,
        -0.0,
        info.tiny / 4,
        -info.tiny / 4,
        info.tiny,
        -info.tiny,
        info.max,
        -info.max,
        info.eps,
        -info.eps,
        info.smallest_normal * info.eps,
        -info.smallest_normal * info.eps,
    ]


def exponent_range(dtype):
    """(least, greatest) binary exponent of the dtype's finite values, subnormals included."""
    info = torch.finfo(dtype)
    return math.floor(math.log2(info.smallest_normal * info.eps)), math.floor(math.log2(info.max))


def representable(dtype, n, rng, mix):
    """``n`` values of ``dtype`` (a CPU tensor): ``mix`` = (share of random bit patterns, share
    of normals at a scale 2^e, e uniform over the dtype's exponent range); the rest special
    values."""
    np_int, t_int = INT[dtype]
    raw = rng.integers(np.iinfo(np_int).min, np.iinfo(np_int).max, n, dtype=np_int, endpoint=True)
    bits = torch.from_numpy(raw).view(t_int).view(dtype)
    lo, hi = exponent_range(dtype)
    scaled = torch.from_numpy(rng.standard_normal(n) * 2.0 ** rng.integers(lo, hi - 1)).to(dtype)
    sp = special(dtype)
    specials = torch.tensor([sp[i] for i in rng.integers(0, len(sp), n)], dtype=torch.float64).to(dtype)
    pick = rng.choice(3, n, p=[mix[0], mix[1], 1 - mix[0] - mix[1]])
    return torch.where(torch.from_numpy(pick == 0), bits, torch.where(torch.from_numpy(pick == 1), scaled, specials))


@st.composite
def tensors(draw, dtypes=DTYPES):
    """A CUDA tensor view: any dtype, 1-3 dims of size 0-33, misaligned offset, maybe transposed
    or strided; values from the dtype's representable range (``representable``)."""
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(st.lists(st.integers(0, 33), min_size=1, max_size=3))
    offset = draw(st.integers(0, 7))
    step = draw(st.sampled_from([1, 1, 2]))
    transpose = draw(st.booleans()) and len(shape) >= 2
    rng = np.random.default_rng(draw(st.integers(0, 2**63 - 1)))
    mix = draw(st.sampled_from([(0.4, 0.4), (1.0, 0.0), (0.0, 1.0), (0.1, 0.1)]))
    full = list(shape)
    full[0] = full[0] * step + offset
    base = representable(dtype, int(np.prod(full)), rng, mix).reshape(full).cuda()
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
    st.one_of(
        st.sampled_from(
            [
                0.0,
                -0.0,
                math.inf,
                -math.inf,
                math.nan,
                1e-40,
                -3e-42,
                5e-324,
                1e-310,
                2.0,
                3.0,
                0.1,
                1e-3,
                7e-4,
                65504.0,
            ]
        ),
        st.builds(lambda e, s: s * 10.0**e, st.floats(-30, 30), st.sampled_from([-1.0, 1.0])),
        st.floats(),
    ),
    st.sampled_from(
        [
            "float",
            "int",
            "np.float32",
            "np.float64",
            "cpu float64",
            "cpu float32",
            "cpu float16",
            "cpu bfloat16",
            "cuda",
        ]
    ),
)


def test_representable_values_cover_the_dtypes_range():
    """The value generator reaches normals of (nearly) every exponent and subnormals in the
    encoding's proportions (random bits), and with the default mix +-inf and NaN too, never
    mostly inf (CPU)."""
    rng = np.random.default_rng(0)
    for dtype in DTYPES:
        x = representable(dtype, 20000, rng, (1.0, 0.0)).double()
        finite = x[x.isfinite() & (x != 0)].abs()
        lo, hi = exponent_range(dtype)
        exps = set(torch.floor(torch.log2(finite)).long().tolist())
        assert len(exps) >= min(hi - lo + 1, 2000) // 2, (dtype, len(exps))
        sub = (finite < torch.finfo(dtype).smallest_normal).double().mean().item()
        if dtype == torch.float16:  # 1/32 of the patterns are subnormal, 1/32 inf or NaN
            assert 0.02 < sub < 0.045 and 0.02 < (~x.isfinite()).double().mean().item() < 0.045
        else:
            assert sub > 0, dtype
        y = representable(dtype, 20000, rng, (0.4, 0.4)).double()
        assert y.isnan().any() and y.isposinf().any() and y.isneginf().any(), dtype
        assert y.isinf().double().mean().item() < 0.1, dtype  # not "all inf" (a scale of 10^38 in fp16)
        z = representable(dtype, 20000, rng, (0.0, 1.0))
        assert z.isfinite().double().mean().item() > 0.9, dtype


@gpu
@FAST
@given(tensors())
def test_relu_property(x):
    check_relu(x)


@gpu
@FAST
@given(tensors(), DIVISORS)
def test_relu_div_property(x, d):
    check_relu_div(x, d)


# --- GEMM: sizes across tile and split boundaries ------------------------------------------

GEMM_BUDGET = 2**28  # M N K of one example at most: the fp64 reference and naive stay fast
REGIMES = ("small", "edges", "split", "wide")


def gemm_sizes(regime: str, seed: int) -> tuple[int, int, int]:
    """(M, K, N) of a ``regime``: "small" 0-70 each; "edges" each a multiple of 64, 128 or 256
    (1-12 of them) plus -1, 0 or 1; "split" small outputs (M, N up to 300) over long K
    (1000-4096, half of them multiples of 64: split-K, the K-split warpgroups, one tile per CTA,
    TF32's swapped split); "wide" outputs of 1800-3000 square (a wave of tiles and more:
    persistent pairs) over short K (1-96). Past GEMM_BUDGET multiply-adds K is cut."""
    rng = np.random.default_rng(seed)
    if regime == "small":
        M, K, N = (int(v) for v in rng.integers(0, 71, 3))
    elif regime == "edges":
        M, K, N = (int(rng.choice([64, 128, 256]) * rng.integers(1, 13) + rng.integers(-1, 2)) for _ in range(3))
    elif regime == "split":
        M, N = (int(v) for v in rng.integers(1, 301, 2))
        K = int(rng.integers(1000, 4097))
        K -= K % 64 if rng.integers(0, 2) else 0  # half of them equal slices of K (TF32's swapped split)
    else:
        M, N = (int(v) for v in rng.integers(1800, 3001, 2))
        K = int(rng.integers(1, 97))
    return M, max(min(K, GEMM_BUDGET // max(M * N, 1)), 1 if K else 0), N


@functools.cache
def runnable(dev) -> tuple:
    """The (algo, dtype) pairs of test_matmul's table that ``dev`` runs (a family that needs
    another GPU is left out, not drawn to raise)."""
    return tuple(
        (a, d) for a, d in ALGO_DTYPES if a in ("auto", "accurate") or gemm.supports(a, 1, 1, 1, d, dev) is None
    )


def test_the_strategy_draws_only_the_families_a_gpu_runs():
    hopper, ampere = runnable(H100), runnable(A100)
    assert {a for a, _ in hopper} == {"naive", "simt", "auto", "tc", "wgmma", "tf32x3", "fp16x3"}
    assert {a for a, _ in ampere} == {"naive", "simt", "auto", "tc"}


def test_the_gemm_sizes_reach_every_branch_of_the_plan():
    """Over the seeds the property draws from, every regime's sizes planned for every family
    and dtype on an H100 reach every branch of the plan (with both partial and whole tiles),
    and stay within the budget (CPU)."""
    seen, sizes = set(), set()
    for regime in REGIMES:
        for seed in range(40):
            M, K, N = gemm_sizes(regime, seed)
            sizes |= {M, K, N}
            assert M * N * K <= GEMM_BUDGET and min(M, N, K) >= 0
            if not (M and N):
                continue
            for algo, dtype in runnable(H100):
                es = dtype.itemsize
                for b in (gemm.Matrix(K, N, N, 1, es, True), gemm.Matrix(K, N, 1, K, es, True)):
                    p = gemm.plan(M, N, K, dtype, gemm.Matrix(M, K, K, 1, es, True), b, "EpiNone", H100, algo=algo)
                    seen.add(branch(p))
    from gemm_plans import ALL_CASES

    # but tf32x3's A split by a pass: the cost model takes it only past GEMM_BUDGET (its saving
    # grows with M N K, the pass and its launch cost M K and ~3 us); its bits are the split in
    # the kernel's, which these draws reach (tests/ops/gemm/test_tf32x3.py compares the two)
    wanted = {c.branch for c in ALL_CASES if not c.branch.endswith("A split by a pass")}
    assert wanted <= seen, wanted - seen
    assert {0, 1} <= sizes and max(sizes) > 2000 and {127, 128, 129} & sizes


def gemm_values(shape, dtype, g, scale_rows: bool, rng):
    """randn of ``shape`` times 2^e per row (``scale_rows``) or per column, e uniform over the
    dtype's window (products of two stay normal in the fp32 accumulator and the sum finite in
    the dtype), with zeros, -0.0 and the dtype's subnormals mixed in."""
    lo, hi = {torch.float16: (-10, 2), torch.bfloat16: (-50, 50), torch.float32: (-50, 50), torch.float64: (-300, 300)}[
        dtype
    ]
    v = torch.randn(shape, device="cuda", generator=g, dtype=torch.float64)
    n = shape[0] if scale_rows else shape[1]
    e = torch.from_numpy(rng.integers(lo, hi + 1, n)).double().cuda()
    v = v * torch.exp2(e)[:, None] if scale_rows else v * torch.exp2(e)[None, :]
    v = v.to(dtype)
    if v.numel():
        k = int(rng.integers(0, 1 + v.numel() // 30))
        idx = torch.from_numpy(rng.integers(0, v.numel(), k)).cuda()
        tiny = torch.finfo(dtype).smallest_normal
        picks = torch.tensor([0.0, -0.0, tiny / 2, -tiny / 4, tiny * torch.finfo(dtype).eps], dtype=torch.float64)
        v.view(-1)[idx] = picks[torch.from_numpy(rng.integers(0, len(picks), k))].to(dtype).cuda()
    return v


def view_of(t, how, rng):
    """``t`` (rows, cols) as a view: "row-major"; "transposed" (a column-major copy's .t());
    "offset" (a slice one element in: rows off 16 bytes); "stepped" (every other column)."""
    r, c = t.shape
    if how == "transposed":
        return t.t().contiguous().t()
    if how == "offset":
        big = torch.empty(r, c + 1, dtype=t.dtype, device=t.device)
        big[:, 1:] = t
        return big[:, 1:]
    if how == "stepped":
        big = torch.empty(r, 2 * c, dtype=t.dtype, device=t.device)
        big[:, ::2] = t
        return big[:, ::2]
    return t


LAYOUTS = ["row-major", "transposed", "offset", "stepped"]


@st.composite
def gemm_operands(draw, regimes=REGIMES, pairs=None):
    """(algo, a, b): an (algo, dtype) the GPU runs, sizes of a regime, values and views."""
    algo, dtype = draw(st.sampled_from(pairs or runnable(gemm.device_info(0))))
    M, K, N = gemm_sizes(draw(st.sampled_from(regimes)), draw(st.integers(0, 2**32 - 1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**63 - 1)))
    g = torch.Generator(device="cuda").manual_seed(int(rng.integers(0, 2**62)))
    a = view_of(gemm_values((M, K), dtype, g, True, rng), draw(st.sampled_from(LAYOUTS)), rng)
    b = view_of(gemm_values((K, N), dtype, g, False, rng), draw(st.sampled_from(LAYOUTS)), rng)
    return algo, a, b


def documented_error(algo, a, b):
    """The absolute errors docs/numerics.md documents beyond the rounding bound, summed over k
    (None: none):

    - fp16x3: a value far below its row's (column's) largest finite magnitude X has an
      absolute error up to 2^-37 X (#fp16x3-error: one below 2^-24 scaled is held as +-2^-24
      in both pieces), X of the operands it splits (test_fp16x3.shifted);
    - a subnormal fp32 operand on the tensor cores: tf32x3 counts it as +-2^-125, the TF32
      kernels may flush it (#denormals-and-ftz): up to 2^-124 times what it multiplies.
    16-bit operands and float32 on the CUDA cores have none."""
    if a.dtype != torch.float32 or algo not in ("tf32x3", "fp16x3", "wgmma", "tc"):
        return None
    ad, bd = a.double().abs(), b.double().abs()
    if algo == "fp16x3":
        if a.shape[1] == 0:  # K = 0: nothing summed
            return torch.zeros((a.shape[0], b.shape[1]), dtype=torch.float64, device=a.device)
        ad, bd = (t.abs() for t in shifted(a, b))  # X of the operands it splits
        fin_a, fin_b = ad.nan_to_num(posinf=0.0), bd.nan_to_num(posinf=0.0)
        da = 2.0**-37 * fin_a.amax(dim=1, keepdim=True)
        db = 2.0**-37 * fin_b.amax(dim=0, keepdim=True)
        return da * bd.sum(0, keepdim=True) + ad.sum(1, keepdim=True) * db + a.shape[1] * da * db

    def sub(t):
        return ((t != 0) & (t < torch.finfo(torch.float32).smallest_normal)).double()

    sa, sb = sub(ad), sub(bd)
    return 2.0**-124 * (sa @ bd + ad @ sb + 2.0**-124 * (sa @ sb))


def check_matmul(case):
    algo, a, b = case
    assert_gemm_close(
        cupy_ops.matmul(a, b, algo=algo),
        a,
        b,
        extra_abs=documented_error(algo, a, b),
        operand_roundoff=roundoff(algo, a.dtype),
    )


@gpu
@GEMM_FAST
@given(gemm_operands())
def test_matmul_property(case):
    check_matmul(case)


X3 = [("tf32x3", torch.float32), ("fp16x3", torch.float32)]


def require_x3():
    if GPU_REASON is None and not gemm.device_info(0).has_wgmma:
        pytest.skip("tf32x3 / fp16x3 need compute capability 9.0")


@gpu
@GEMM_FAST
@given(st.sampled_from(X3), st.sampled_from(REGIMES), st.integers(0, 2**32 - 1), st.sampled_from(["randn", "rand"]))
def test_x3_error_is_within_two_to_the_minus_18_at_any_shape(pair, regime, seed, fill):
    """tf32x3 and fp16x3 keep 22 of each operand's 24 bits: at any drawn shape (K up to 4096)
    the error against fp64 is at most 2^-18 of the largest output (randn and torch.rand)."""
    require_x3()
    algo, _ = pair
    M, K, N = gemm_sizes(regime, seed)
    hypothesis.assume(M and N and K)
    g = torch.Generator(device="cuda").manual_seed(seed)
    gen = getattr(torch, fill)
    a, b = gen(M, K, device="cuda", generator=g), gen(K, N, device="cuda", generator=g)
    ref = a.double() @ b.double()
    err = ((cupy_ops.matmul(a, b, algo=algo).double() - ref).abs().max() / ref.abs().max()).item()
    assert err <= 2.0**-18, f"{algo} {M}x{K}x{N} {fill}: {err:.3g} = 2^{math.log2(err):.2f}"


@gpu
@pytest.mark.slow
@SLOW
@given(tensors())
def test_relu_property_slow(x):
    check_relu(x)


@gpu
@pytest.mark.slow
@SLOW
@given(tensors(), DIVISORS)
def test_relu_div_property_slow(x, d):
    check_relu_div(x, d)


@gpu
@pytest.mark.slow
@SLOW
@given(gemm_operands())
def test_matmul_property_slow(case):
    check_matmul(case)
