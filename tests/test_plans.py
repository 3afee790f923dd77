"""The pure planning functions (elementwise launch shape, the GEMM plan) and the host-side
divisor rounding: CPU logic, called directly, no globals patched."""
import numpy as np
import pytest
import torch

from cupy_ops import checks
from cupy_ops.ops import elementwise, gemm
from cupy_ops.ops import divisor as _divisor
from cupy_ops.ops.gemm import Device, Matrix


def plan(n, itemsize, *ptrs):
    """(blocks, head, vec) of an elementwise launch."""
    return elementwise.plan(n, itemsize, ptrs)


@pytest.mark.parametrize("n, itemsize, x_off, y_off, expect_vec, expect_head", [
    (1000, 4, 0, 0, 1, 0),      # both aligned: vectors from the first element
    (1000, 4, 4, 4, 1, 3),      # both at +4 bytes (x[1:] in place): 3 scalars reach 16
    (1000, 2, 2, 2, 1, 7),      # fp16 at +2 bytes: 7 scalars
    (2, 4, 4, 4, 1, 2),         # head never exceeds n
    (1000, 4, 4, 0, 0, 0),      # different alignment (x[1:] into a fresh y): scalar path
    (1000, 8, 8, 8, 1, 1),      # float64 at +8
])
def test_elementwise_plan_alignment(n, itemsize, x_off, y_off, expect_vec, expect_head):
    base = 1 << 20
    blocks, head, vec = plan(n, itemsize, base + x_off, base + y_off)
    assert (vec, head) == (expect_vec, expect_head)
    if vec and head < n:
        assert (base + x_off + head * itemsize) % 16 == 0
    assert blocks >= 1


def test_elementwise_plan_binary_needs_all_three_aligned():
    assert plan(1000, 4, 16, 32, 48)[2] == 1
    assert plan(1000, 4, 16, 36, 48)[2] == 0
    assert plan(1000, 4, 20, 36, 52) == (plan(1000, 4, 20, 36)[0], 3, 1)


def test_elementwise_plan_one_block_per_chunk():
    chunk = elementwise.THREADS * elementwise.VECS_PER_THREAD * 16  # bytes per block
    blocks, _, _ = plan(4096 * 393216, 4, 0, 0)
    assert blocks == 4096 * 393216 * 4 // chunk           # KernelBench ReLU: 1.57 M blocks
    blocks, _, _ = plan(3, 4, 0, 0)
    assert blocks == 1                                     # no full vector: block 0 does head/tail
    blocks, _, _ = plan(2**31 + 17, 2, 0, 2)               # misaligned, > 2**31 elements
    assert blocks == -(-(2**31 + 17) // (elementwise.THREADS * 8))


def test_elementwise_plan_covers_every_element():
    chunk = elementwise.THREADS * elementwise.VECS_PER_THREAD * 16
    for n in [1, 3, 4, 5, 127, 128, 129, 4097, 100003]:
        for itemsize in (2, 4, 8):
            for off in range(0, 16, itemsize):
                for y_off in (off, 0):
                    blocks, head, vec = plan(n, itemsize, 64 + off, 64 + y_off)
                    if vec:
                        vecs = (n - head) * itemsize // 16
                        tail = n - head - vecs * 16 // itemsize
                        assert head < 16 // itemsize and tail < 16 // itemsize
                        assert head <= elementwise.THREADS and blocks * chunk >= vecs * 16
                    else:
                        assert blocks * elementwise.THREADS * 8 >= n


def test_is_dense():
    x = torch.empty(4, 6)
    assert checks.dense(x)
    assert checks.dense(x.t())
    assert checks.dense(torch.empty(2, 3, 4).permute(2, 0, 1))
    assert checks.dense(torch.empty(4, 1, 6)[:, :, :])
    assert not checks.dense(x[:, 1:])
    assert not checks.dense(x[::2])
    assert checks.dense(x[1:])  # offset views are still one block
    assert not checks.dense(torch.empty(3).expand(4, 3))  # overlapping


# --- the divisor rule, against exact arithmetic ---------------------------------------------
# torch computes t / d (d a number) as t * (1 / d), the reciprocal taken in double and rounded to
# the compute type: fp32 for float32 / float16 / bfloat16, fp64 for float64 (measured on an H200,
# docs/numerics.md#the-divisor). The reference below does not share the implementation's
# arithmetic: 1 / d is an exact Fraction, rounded to nearest even by hand into binary64 and then
# binary32, with IEEE 754's subnormals, overflow to inf, signed zeros and NaN.
import math  # noqa: E402
from fractions import Fraction  # noqa: E402

BINARY64 = (53, -1022, 1023)   # significand bits, least normal exponent, greatest exponent
BINARY32 = (24, -126, 127)


def round_to_nearest_even(q, fmt):
    """The exact value ``q`` (a Fraction; +-inf passes through) rounded to nearest, ties to
    even, in the binary format ``fmt``: a Fraction (0 where it underflows: the caller keeps
    the sign) or +-inf where it overflows."""
    if not isinstance(q, Fraction) or q == 0:
        return q
    p, emin, emax = fmt
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()   # 2^(e-1) < a < 2^(e+1)
    if Fraction(2) ** e > a:
        e -= 1                                                   # now 2^e <= a < 2^(e+1)
    quantum = Fraction(2) ** (max(e, emin) - p + 1)              # below 2^emin: the subnormals' spacing
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


_F32_MAX, _F32_TINY, _F32_TRUE_MIN = float(np.finfo(np.float32).max), 2.0**-126, 2.0**-149
_OVERFLOW_TIE = float(1 / Fraction(2**128 - 2**103))   # 1 / d near the midpoint of fp32's max and 2^128
_rng_d = np.random.default_rng(20261127)
DIVISORS = (
    # log-uniform magnitudes over 1e-45..1e45, both signs
    [float(s * 10.0 ** e) for e, s in zip(_rng_d.uniform(-45, 45, 600), _rng_d.choice([-1.0, 1.0], 600))]
    # fp32's boundaries: the reciprocal overflows, reaches the largest finite value, the least
    # normal, the subnormals and their rounding to 0 (2^-150 is a tie: to even, 0)
    + [_F32_MAX, -_F32_MAX, 1 / _F32_MAX, math.nextafter(1 / _F32_MAX, 0), math.nextafter(1 / _F32_MAX, 1),
       _F32_TINY, _F32_TRUE_MIN, -_F32_TRUE_MIN, 2.0**-127, 2.0**-128, -(2.0**-128), 2.0**127, 2.0**128,
       _OVERFLOW_TIE, math.nextafter(_OVERFLOW_TIE, 0), math.nextafter(_OVERFLOW_TIE, 1), -_OVERFLOW_TIE,
       2.0**149, 1.5 * 2.0**149, 2.0**150, math.nextafter(2.0**150, 0), math.nextafter(2.0**150, math.inf),
       1.25 * 2.0**150, 2.0**151, -(2.0**151)]
    # reciprocals that fall in fp32's subnormals: d over 2^126..2^128, both signs
    + [s * 2.0**126 * (1 + k / 64) for k in range(129) for s in (1.0, -1.0)]
    # reciprocals past double's range or in its subnormals
    + [5e-324, -5e-324, 2.0**-1022, 1e308, -1.7976931348623157e308]
    # the reciprocal in double lands on an fp32 tie, so rounding 1 / d straight to fp32 would differ
    + [0.6372658082104927, 0.5412914007013113, 0.9406392351008829, 0.7967688936918248]
    # the special values, everyday divisors, and the other kinds torch takes
    + [0.0, -0.0, math.inf, -math.inf, math.nan, 2.0, 3.0, 0.1, 1e-3, 7e-4, 65504.0, 1e-30]
    + [7, -3, 2**70, True, False, np.float32(0.1), np.float64(1e-3), np.int64(3)])


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


# --- the GEMM plan --------------------------------------------------------------------------

H100 = Device(0, 132, (9, 0))
A100 = Device(0, 108, (8, 0))
ES = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2, torch.float64: 8}


def rowmajor(r, c, dtype=torch.float32, aligned=True):
    return Matrix(r, c, c, 1, ES[dtype], aligned)


def colmajor(r, c, dtype=torch.float32):
    return Matrix(r, c, 1, r, ES[dtype], True)


def gplan(M, K, N, dtype=torch.float32, a=None, b=None, epi="EpiNone", dev=H100, **kw):
    return gemm.plan(M, N, K, dtype, a or rowmajor(M, K, dtype), b or rowmajor(K, N, dtype), epi, dev, **kw)


def test_auto_follows_dtype_torch_switches_and_gpu():
    assert gplan(512, 512, 512).family == "simt"                           # fp32, TF32 off: full fp32
    assert gplan(512, 512, 512, tf32=True).family == "wgmma"               # TF32 allowed, Hopper
    assert gplan(512, 512, 512, tf32=True, dev=A100).family == "tc"        # elsewhere: mma.sync
    assert gplan(512, 512, 512, torch.bfloat16).family == "wgmma"
    assert gplan(512, 512, 512, torch.float16, dev=A100).family == "tc"
    assert gplan(512, 512, 512, torch.float64).family == "naive"
    assert gplan(65535 * 128 + 1, 4, 4).family == "naive"                   # more row tiles than the grid holds


@pytest.mark.parametrize("algo, dtype, dev, match", [
    ("simt", torch.float16, H100, "algo='simt' is the fp32 kernel; got torch.float16"),
    ("tc", torch.float64, H100, "algo='tc' takes float16, bfloat16 or float32"),
    ("wgmma", torch.bfloat16, A100, r"algo='wgmma' needs a Hopper GPU \(compute capability 9.0\); cuda:0 has 8.0"),
    ("tf32x3", torch.bfloat16, H100, "algo='tf32x3' is the fp32 kernel on TF32 tensor cores .*got torch.bfloat16"),
    ("tf32x3", torch.float32, A100, r"algo='tf32x3' needs a Hopper GPU .* has 8.0 \(use 'auto' or simt"),
])
def test_an_algo_that_cannot_take_the_problem_is_a_value_error(algo, dtype, dev, match):
    with pytest.raises(ValueError, match=match):
        gplan(64, 64, 64, dtype, dev=dev, algo=algo)
    with pytest.raises(ValueError, match=r"algo='simt' takes at most 8388480 rows \(M\), got 8388481"):
        gplan(65535 * 128 + 1, 4, 4, algo="simt")


def test_hopper_tile_width_and_split_k_follow_the_tables():
    p = gplan(4096, 4096, 4096, torch.bfloat16)                  # 512 wide tiles: clusters of 2, persistent
    assert (p.tile, p.slices, p.grid, p.cluster, p.persistent) == ((128, 256), 1, (132, 1, 1), 2, True)
    assert p.kernel == "gemm_wgmma<bf16, true, 256, 2, EpiNone>" and p.b.prep == "n-major" and p.a.prep == "as is"
    assert p.group == gemm.tables.WG_GROUP and "persistent, cluster 2" in str(p)
    p = gplan(2048, 2048, 2048, torch.bfloat16)                  # 0.97 waves of wide tiles: one CTA per tile
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 256), 1, False, (128, 1, 1))
    p = gplan(1024, 1024, 1024, torch.bfloat16, ksplit=False)    # 64 tiles of 128 x 128: under half a wave
    assert p.tile == (128, 64) and p.slices == 1 and p.grid == (128, 1, 1)   # 64-wide: one wave
    assert p.kernel == "gemm_wgmma<bf16, true, 64, 1, EpiNone>" and not p.persistent
    p = gplan(256, 1024, 1024, torch.bfloat16, epi="EpiBiasReluScale", ksplit=False)   # 16 tiles: split K in 2
    assert (p.slices, p.kslice, p.grid, p.tile) == (2, 512, (32, 1, 1), (128, 128))
    assert p.kernel == "gemm_wgmma_partial<bf16, true, 128, 1>" and p.reduce == "gemm_splitk_reduce<bf16, EpiBiasReluScale>"
    forced = gplan(256, 1024, 1024, torch.bfloat16, tile_n=256, split_k=False)
    assert forced.tile == (128, 256) and forced.slices == 1


def test_hopper_clusters_and_persistent_grid():
    """Clusters of 2 from a wave of tiles on, run persistent (one cluster per 2 SMs at most, the
    runner lowers it to the clusters that fit); overrides for tuning; 128 x 64 tiles only in
    clusters of 1 (each CTA of a pair loads whole 64-column boxes of B)."""
    p = gplan(1024, 8192, 8192, torch.float32, b=rowmajor(8192, 8192).T, tf32=True)   # 8 x 32 wide tiles
    assert (p.cluster, p.persistent, p.grid, p.kernel) == (2, True, (132, 1, 1), "gemm_wgmma<float, false, 256, 2, EpiNone>")
    assert gemm.wgmma.walk(1024, 8192, 256, 1, 2, 132) == (132, 4 * 32)
    assert gemm.wgmma.walk(300, 300, 128, 1, 2, 132) == (6 * 2, 2 * 3)        # 3 tile rows: 2 cluster rows
    assert gemm.wgmma.walk(1024, 1024, 128, 3, 1, 132) == (132, 8 * 8 * 3)    # split-K slices are units
    p = gplan(4096, 4096, 4096, torch.bfloat16, cluster=1)
    assert (p.cluster, p.persistent, p.grid) == (1, False, (512, 1, 1))
    p = gplan(4096, 4096, 4096, torch.bfloat16, cluster=1, persistent=True, group=3)
    assert (p.persistent, p.grid, p.group) == (True, (132, 1, 1), 3)
    p = gplan(4096, 4096, 4096, torch.bfloat16, persistent=False)
    assert (p.cluster, p.grid) == (2, (512, 1, 1))
    assert gplan(64, 4096, 4096, torch.bfloat16).cluster == 1   # one tile row: no pair to share B
    with pytest.raises(ValueError, match=r"cluster=2 needs tile_n >= 128 .*got tile_n=64"):
        gplan(4096, 4096, 4096, torch.bfloat16, cluster=2, tile_n=64)
    with pytest.raises(ValueError, match=r"cluster must be one of \(1, 2\), got 4"):
        gplan(4096, 4096, 4096, torch.bfloat16, cluster=4)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=r"group must be an int >= 1, got"):
            gplan(4096, 4096, 4096, torch.bfloat16, group=bad)
    # every variant a plan can name is registered (the offline check compiles them all)
    names = set(gemm.variants()["gemm_sm90a.cu"])
    for kw in ({}, {"cluster": 1}, {"tile_n": 64}, {"tile_n": 128, "cluster": 2}, {"tile_n": 256, "cluster": 2}):
        for M in (256, 1024, 4096):
            assert gplan(M, 1024, 1024, torch.bfloat16, **kw).kernel in names


def test_hopper_wide_grids_are_chosen_by_whole_waves():
    """From a wave of 128 x 256 tiles on, the tile width and cluster that finish first counting
    whole waves (WG_WIDE_SPEEDS): a last wave of 0.12 costs a whole one."""
    assert gemm.wgmma.wide(4096, 4096, 132) == (256, 2)     # 256 pairs / 66: 3.9 waves
    assert gemm.wgmma.wide(4224, 4096, 132) == (256, 1)     # 272 pairs: 5 waves; 528 tiles / 132: 4.0
    assert gemm.wgmma.wide(4352, 4096, 132) == (256, 2)     # 4.1 waves either way: pairs are faster
    assert gemm.wgmma.wide(3072, 3072, 132) == (128, 2)     # 2.2 -> 3 waves, 128-wide 4.4 -> 5 half waves
    assert gemm.wgmma.wide(128, 65536, 132) == (256, 1)     # one tile row: no pair
    assert gemm.wgmma.wide(2048, 2048, 132) is None         # under a wave: the tile_n table
    p = gplan(4224, 4096, 4096, torch.bfloat16)
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 256), 1, False, (528, 1, 1))
    p = gplan(3072, 4096, 3072, torch.bfloat16)
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 128), 2, True, (132, 1, 1))
    p = gplan(4224, 4096, 4096, torch.bfloat16, tile_n=256)     # an override: the old rule (clusters from a wave)
    assert p.cluster == 2


def test_hopper_epilogue_stores_through_the_tma_where_c_has_a_tensor_map():
    """TMA stores where C's rows (N elements) are a multiple of 16 bytes and C is the output
    (not split-K's partial products); the threads' stores otherwise, or when asked."""
    p = gplan(4096, 4096, 4096, torch.bfloat16)
    assert p.tma_store and "TMA stores" in str(p)
    assert not gplan(4096, 4096, 4100, torch.bfloat16).tma_store          # 8200-byte rows
    assert gplan(4096, 4096, 4100, tf32=True).tma_store                    # 16400-byte rows
    assert not gplan(4096, 4096, 4097, tf32=True).tma_store
    p = gplan(256, 1024, 1024, torch.bfloat16, ksplit=False)               # split K
    assert p.slices > 1 and not p.tma_store
    p = gplan(4096, 4096, 4096, torch.bfloat16, tma_store=False)
    assert not p.tma_store and "thread stores" in str(p)
    assert gplan(4096, 4096, 4096, torch.bfloat16, tma_store=True).tma_store
    with pytest.raises(ValueError, match=r"tma_store=True needs C's rows a multiple of 16 bytes .*N = 4100 elements "
                                         r"of 2 bytes, 1 K slices"):
        gplan(4096, 4096, 4100, torch.bfloat16, tma_store=True)
    assert not gplan(4096, 4096, 4096, algo="tf32x3").tma_store            # tf32x3: the threads' stores


def test_hopper_small_outputs_split_k_between_the_warpgroups():
    """Where the table would take 128 x 64 tiles, or split K into no more CTAs than 64 x 128
    tiles make, and no single 128 x 64 tile per CTA (below): 64 x 128 tiles, the two consumer
    warpgroups over halves of every k-tile, one CTA per tile; not past that, nor for the
    swapped TF32 kernel; overrides."""
    p = gplan(1024, 2048, 1024, torch.bfloat16)                          # 32 k-tiles
    assert p.ksplit and p.kernel == "gemm_wgmma_ksplit<bf16, true, 128, EpiNone>"
    assert (p.tile, p.grid, p.cluster, p.persistent, p.slices, p.tma_store) == ((64, 128), (128, 1, 1), 1, False, 1, True)
    assert "K split between the warpgroups" in str(p)
    p = gplan(64, 1024, 2048, torch.bfloat16, epi="EpiBiasReluScale")   # 64 rows: no 128-row tile
    assert p.ksplit and p.grid == (16, 1, 1) and p.kernel == "gemm_wgmma_ksplit<bf16, true, 128, EpiBiasReluScale>"
    assert gplan(256, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T).ksplit   # 32 k-tiles: split-K's 64 CTAs lose
    assert not gplan(64, 8192, 256, torch.bfloat16).ksplit               # 2 tiles split in 16: 128 k-tiles
    assert not gplan(128, 4096, 1024, torch.bfloat16).ksplit             # 64 k-tiles, 16 CTAs against 64
    assert not gplan(2048, 1024, 1024, torch.bfloat16).ksplit            # a wave of 128 x 128 tiles
    assert gplan(1024, 1024, 1024, tf32=True).swap                       # TF32 with a row-major b: swapped
    p = gplan(1024, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T, epi="EpiBiasReluScale")
    assert p.ksplit and p.kernel == "gemm_wgmma_ksplit<float, false, 128, EpiBiasReluScale>"
    p = gplan(1024, 1024, 1024, tf32=True, ksplit=True)                  # asked: b transposed, not swapped
    assert p.ksplit and not p.swap and p.b.prep == "transpose"
    assert gplan(1024, 1024, 1024, torch.bfloat16, ksplit=True).ksplit   # asked, where the table takes single tiles
    assert not gplan(1024, 1024, 1024, torch.bfloat16, tile_n=64).ksplit   # an override of the table: the table's kernel
    assert gplan(4096, 4096, 4096, torch.bfloat16, ksplit=True).grid == (64 * 32, 1, 1)
    with pytest.raises(ValueError, match=r"ksplit=True takes no tile_n, cluster or persistent override"):
        gplan(1024, 1024, 1024, torch.bfloat16, ksplit=True, cluster=1)
    with pytest.raises(ValueError, match=r"swap=True with ksplit=True"):
        gplan(1024, 1024, 1024, tf32=True, ksplit=True, swap=True)


def test_hopper_small_16_bit_outputs_take_one_128_x_64_tile_per_cta():
    """Where the table would split K between the warpgroups, 16-bit outputs of more than 64
    rows with at most WG_SINGLE_MAX_KTILES k-tiles take the plain kernel's 128 x 64 tiles, one
    per CTA, the epilogue staged in the ring (gemm_wgmma_single, the K-splitting kernel's
    shared memory); TF32, 64 rows or longer K keep the K split; overrides."""
    assert gemm.tables.WG_SINGLE_MAX_KTILES == 24
    p = gplan(1024, 1024, 1024, torch.bfloat16)
    assert p.single and not p.ksplit and p.kernel == "gemm_wgmma_single<bf16, true, 64, EpiNone>"
    assert (p.tile, p.grid, p.cluster, p.persistent, p.slices, p.tma_store, p.smem) == (
        (128, 64), (128, 1, 1), 1, False, 1, True, gemm.geometry.WG_KSPLIT_SMEM_BYTES)
    assert "one tile per CTA, epilogue staged in the ring" in str(p)
    p = gplan(256, 1024, 1024, torch.float16, b=rowmajor(1024, 1024, torch.float16).T, epi="EpiBiasReluScale")
    assert p.single and p.grid == (32, 1, 1) and p.kernel == "gemm_wgmma_single<f16, false, 64, EpiBiasReluScale>"
    assert gplan(1024, 1536, 1024, torch.bfloat16).single                # 24 k-tiles
    assert not gplan(1024, 1600, 1024, torch.bfloat16).single            # 25: the K split
    assert not gplan(64, 1024, 2048, torch.bfloat16).single              # 64 rows: the K split's 64-row tiles
    assert gplan(65, 1024, 2048, torch.bfloat16).single
    assert not gplan(1024, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T).single   # TF32: the K split
    assert not gplan(2048, 1024, 1024, torch.bfloat16).single            # a wave of 128 x 128 tiles
    assert not gplan(1024, 1024, 1024, torch.bfloat16, ksplit=False).single   # no small-output kernel: 128 x 64 tiles
    assert not gplan(1024, 1024, 1024, torch.bfloat16, single=False).single
    p = gplan(4096, 8192, 4096, torch.bfloat16, single=True)             # asked: one CTA per tile anywhere
    assert p.single and p.grid == (32 * 64, 1, 1)
    for kw, named in ((dict(tile_n=64), "tile_n=64"), (dict(cluster=1), "cluster=1"),
                      (dict(persistent=False), "persistent=False"), (dict(ksplit=True), "ksplit=True")):
        with pytest.raises(ValueError, match=r"single=True takes 16-bit operands and no tile_n, cluster, persistent "
                                             rf"or ksplit=True override .* got torch.bfloat16, {named}$"):
            gplan(1024, 1024, 1024, torch.bfloat16, single=True, **kw)
    with pytest.raises(ValueError, match=r"single=True takes 16-bit operands .* got torch.float32"):
        gplan(1024, 1024, 1024, tf32=True, b=rowmajor(1024, 1024).T, single=True)


def test_hopper_tf32_with_a_row_major_b_swaps_the_operands():
    """TF32 reads shared memory K-major only: a row-major b (matmul's) is taken as C^T =
    B^T A^T (B^T through the wgmma's registers) where B's and C's rows are 16-byte aligned, with
    C^T's geometry; elsewhere, or where C^T's geometry splits K, or asked, b is transposed."""
    p = gplan(4096, 4096, 4096, tf32=True)
    assert p.swap and p.kernel == "gemm_wgmma_swap<256, 2, EpiNone>" and (p.a.prep, p.b.prep) == ("as is", "n-major")
    assert p.tma_store and p.slices == 1 and p.b.ld == 4096 and "C^T = B^T A^T" in str(p)
    p = gplan(1024, 4096, 8192, tf32=True)                       # C^T: 8192 x 1024, 64 x 4 wide tiles
    assert (p.tile, p.cluster, p.persistent, p.grid) == ((128, 256), 2, True, (132, 1, 1))   # C^T's pairs
    assert gplan(8192, 4096, 1024, tf32=True, swap=False).grid == (132, 1, 1)   # C's geometry would be the same
    assert gplan(1024, 1024, 1024, tf32=True).kernel == "gemm_wgmma_swap<64, 1, EpiNone>"
    w = rowmajor(8192, 8192)                                     # linear's weight.T of a column-major weight
    assert gplan(1024, 8192, 8192, b=w, epi="EpiBiasReluScale", tf32=True).kernel == \
        "gemm_wgmma_swap<256, 2, EpiBiasReluScale>"
    for b in (rowmajor(4096, 4096, aligned=False), Matrix(4096, 4096, 4097, 1, 4, True)):   # B's rows off 16 bytes
        assert not gplan(4096, 4096, 4096, b=b, tf32=True).swap
    p = gplan(4096, 4096, 4094, tf32=True)                       # C's rows off 16 bytes
    assert not p.swap and p.b.prep == "transpose" and p.kernel == "gemm_wgmma<float, false, 256, 2, EpiNone>"
    p = gplan(256, 1024, 1024, tf32=True)                        # C^T's 16 tiles split K: transpose instead
    assert not p.swap and p.b.prep == "transpose" and p.ksplit   # (and the K-splitting warpgroups)
    p = gplan(256, 1024, 1024, tf32=True, ksplit=False)
    assert not p.swap and p.slices > 1 and p.b.prep == "transpose"
    p = gplan(256, 1024, 1024, tf32=True, swap=True)
    assert p.swap and p.slices == 1
    assert not gplan(4096, 4096, 4096, tf32=True, swap=False).swap
    assert not gplan(4096, 4096, 4096, tf32=True, tma_store=False).swap   # the threads' stores: transpose
    assert not gplan(4096, 4096, 4096, torch.bfloat16).swap             # 16-bit: the transpose bit
    padded = Matrix(4096, 4094, 4096, 1, 4, True)                    # b's rows 16 bytes apart, N = 4094:
    assert not gplan(4096, 4096, 4094, b=padded, tf32=True).swap     # wgmma's TMA stores need C's rows so too,
    assert gplan(4096, 4096, 4094, b=padded, algo="tf32x3").swap     # tf32x3 stores C with its threads
    with pytest.raises(ValueError, match=r"swap=True needs float32 operands, a row-major b .*N = 4094"):
        gplan(4096, 4096, 4094, tf32=True, swap=True)
    with pytest.raises(ValueError, match=r"swap=True needs float32 .*got torch.bfloat16"):
        gplan(4096, 4096, 4096, torch.bfloat16, swap=True)
    with pytest.raises(ValueError, match=r"swap=True with tma_store=False"):
        gplan(4096, 4096, 4096, tf32=True, swap=True, tma_store=False)


def test_tf32x3_plan():
    """3xTF32: asked for by name only ("auto" follows torch's switches); 128 x 128 tiles, A
    K-major and B K-major or, row-major (rows 16-byte aligned), as C^T = B^T A^T (TF32 reads
    shared memory K-major only); the whole shared-memory budget; split-K up to half a wave of
    tiles; K == 0 writes the epilogue of 0 through the tc kernel."""
    assert "tf32x3" in gemm.ALGOS and gplan(4096, 4096, 4096).family == "simt"
    p = gplan(4096, 4096, 4096, algo="tf32x3")
    assert (p.family, p.kernel, p.tile, p.grid, p.slices) == ("tf32x3", "gemm_tf32x3_swap<128, EpiNone>", (128, 128),
                                                            (32, 32, 1), 1)
    assert p.smem == gemm.geometry.X3_SMEM_BYTES and (p.a.prep, p.b.prep) == ("as is", "n-major") and p.bk == 32
    assert p.swap                                                             # row-major b: C^T = B^T A^T
    p = gplan(4096, 4096, 4096, b=colmajor(4096, 4096), algo="tf32x3")
    assert not p.swap and p.kernel == "gemm_tf32x3<128, EpiNone>" and p.b.prep == "as is"
    p = gplan(300, 200, 130, algo="tf32x3")                                   # b's rows off 16 bytes: transposed
    assert not p.swap and p.b.prep == "transpose"
    p = gplan(300, 200, 128, algo="tf32x3", swap=False)
    assert not p.swap and p.b.prep == "transpose"
    p = gplan(256, 1024, 1024, algo="tf32x3")                                 # C^T: 8 x 2 tiles, split K in 4
    assert p.swap and p.kernel == "gemm_tf32x3_swap_partial<128>" and p.grid == (2, 8, 4)
    w = rowmajor(8192, 8192)
    p = gplan(1024, 8192, 8192, b=w.T, epi="EpiBiasReluScale", algo="tf32x3")
    assert p.kernel == "gemm_tf32x3<128, EpiBiasReluScale>" and p.b.prep == "as is" and p.slices == 1
    p = gplan(1024, 1024, 1024, algo="tf32x3", epi="EpiBiasReluScale")     # 64 tiles: under half a wave
    assert (p.slices, p.kslice, p.kernel) == (2, 512, "gemm_tf32x3_swap_partial<128>")
    assert p.reduce == "gemm_splitk_reduce<float, EpiBiasReluScale>"
    assert gplan(2048, 2048, 2048, algo="tf32x3").slices == 1                # 256 tiles
    assert gplan(1024, 1024, 1024, algo="tf32x3", split_k=False).slices == 1
    assert gplan(1024, 1024, 1024, algo="tf32x3", tile_n=128).tile == (128, 128)
    with pytest.raises(ValueError, match=r"tile_n must be one of \(128,\) for algo='tf32x3', got 256"):
        gplan(1024, 1024, 1024, algo="tf32x3", tile_n=256)
    p = gplan(64, 0, 64, algo="tf32x3")
    assert p.family == "tc" and "K == 0" in str(p)
    assert gemm.runs_sm90a((9, 0)) and not gemm.runs_sm90a((10, 0)) and not gemm.runs_sm90a((8, 9))


def test_fp16x3_plan():
    """fp16x3: asked for by name only; both operands in their tensor-core form (K-major fp32
    rows) for the split pass, 128 x 128 tiles over the fp16 pieces (64 values of K a tile),
    the whole shared-memory budget, split-K as 3xTF32's; K == 0 through the tc kernel; no
    swapped kernel, no other tile width. The models' choice by size (X3H_MIN_WORK)."""
    assert "fp16x3" in gemm.ALGOS and gplan(4096, 4096, 4096).family == "simt"
    p = gplan(4096, 4096, 4096, algo="fp16x3")
    assert (p.family, p.kernel, p.tile, p.grid, p.slices, p.bk) == ("fp16x3", "gemm_fp16x3<128, EpiNone, true>",
                                                                   (128, 128), (132, 1, 1), 1, 64)
    assert p.persistent and p.group == gemm.tables.WG_GROUP   # 1024 tiles walked by one CTA an SM
    assert gplan(4096, 4096, 4096, algo="fp16x3", persistent=False).grid == (1024, 1, 1)
    assert not gplan(1024, 1024, 1024, algo="fp16x3", split_k=False).persistent   # 64 tiles: one CTA each
    assert p.smem == gemm.geometry.X3_SMEM_BYTES and not p.swap
    assert (p.a.prep, p.b) == ("as is", gemm.Operand("n-major split", False, 4096))   # b split in place
    w = rowmajor(8192, 8192)
    p = gplan(1024, 8192, 8192, b=w.T, epi="EpiBiasReluScale", algo="fp16x3")
    assert p.kernel == "gemm_fp16x3<128, EpiBiasReluScale, false>" and p.b.prep == "as is" and p.grid == (132, 1, 1)
    for b in (rowmajor(4096, 4094), rowmajor(4096, 4096, aligned=False)):   # b's rows off 16 bytes: transposed
        p = gplan(4096, 4096, b.cols, b=b, algo="fp16x3")
        assert p.kernel == "gemm_fp16x3<128, EpiNone, false>" and p.b.prep == "transpose"
    p = gplan(1024, 1024, 1024, algo="fp16x3", epi="EpiBiasReluScale")     # 64 tiles: under half a wave
    assert (p.slices, p.kslice, p.kernel, p.grid) == (2, 512, "gemm_fp16x3_partial<128, true>", (64, 1, 2))
    assert p.reduce == "gemm_splitk_reduce<float, EpiBiasReluScale>"
    assert gplan(1024, 1024, 1024, algo="fp16x3", split_k=False).slices == 1
    with pytest.raises(ValueError, match=r"tile_n must be one of \(128,\) for algo='fp16x3', got 256"):
        gplan(1024, 1024, 1024, algo="fp16x3", tile_n=256)
    with pytest.raises(ValueError, match="swap=True: algo='fp16x3'"):
        gplan(1024, 1024, 1024, algo="fp16x3", swap=True)
    with pytest.raises(ValueError, match="algo='fp16x3' is the fp32 kernel on fp16 tensor cores .*got torch.float16"):
        gplan(64, 64, 64, torch.float16, algo="fp16x3")
    with pytest.raises(ValueError, match=r"algo='fp16x3' needs a Hopper GPU .* has 8.0"):
        gplan(64, 64, 64, dev=A100, algo="fp16x3")
    p = gplan(64, 0, 64, algo="fp16x3")
    assert p.family == "tc" and "K == 0" in str(p)
    assert gemm.fp32_accurate(1024, 8192, 8192) == "fp16x3" and gemm.fp32_accurate(1024, 1024, 1024) == "tf32x3"
    assert gemm.fp32_accurate(2048, 2048, 2048) == "fp16x3" and gemm.fp32_accurate(2048, 2048, 2047) == "tf32x3"
    # a batch's entries: simt's batched kernel below X3_BATCH_MIN_WORK (the x3 families loop)
    assert gemm.fp32_accurate(1024, 1024, 128, batched=True) == "simt"
    assert gemm.fp32_accurate(2048, 2048, 2048, batched=True) == "fp16x3"
    assert "fp16x3_split" in gemm.variants()["gemm_sm90a.cu"]


def test_simt_split_k_fills_idle_sms():
    p = gplan(1024, 1024, 1024, epi="EpiBiasReluScale")         # 64 tiles on 132 SMs
    assert (p.slices, p.kslice, p.grid) == (2, 512, (8, 8, 2))
    assert p.kernel == "gemm_simt<true, false, EpiNone, true, 1, false>"   # partial products carry no epilogue
    assert p.reduce == "gemm_splitk_reduce<float, EpiBiasReluScale>"
    p = gplan(4096, 4096, 4096)
    assert p.slices == 1 and p.kernel == "gemm_simt<true, false, EpiNone, false, 2, true>"


def test_simt_blocks_per_sm_and_shared_memory_by_layout():
    # SIMT_OCCUPANCY: row-major a and b at 2 blocks per SM, tiles in dynamic shared memory
    # (which the launch then passes); both K-major (the nn.Linear weight) 2 blocks of static
    # tiles with the fused epilogue, 1 of dynamic without; an M-major a (a transposed view) 2
    # static with a row-major b, 2 dynamic with a K-major one, 1 static with that and the fused
    # epilogue; split-K partials 1 static
    wt = colmajor(4096, 4096)                      # b = weight.T: K-major
    at = colmajor(4096, 4096)                      # a = x.T: M-major
    cases = [(dict(), "gemm_simt<true, false, EpiNone, false, 2, true>", gemm.geometry.SIMT_SMEM_BYTES),
             (dict(epi="EpiBiasReluScale"), "gemm_simt<true, false, EpiBiasReluScale, false, 2, true>",
              gemm.geometry.SIMT_SMEM_BYTES),
             (dict(b=wt), "gemm_simt<true, true, EpiNone, false, 1, true>", gemm.geometry.SIMT_SMEM_BYTES),
             (dict(b=wt, epi="EpiBiasReluScale"), "gemm_simt<true, true, EpiBiasReluScale, false, 2, false>", 0),
             (dict(a=at), "gemm_simt<false, false, EpiNone, false, 2, false>", 0),
             (dict(a=at, epi="EpiBiasReluScale"), "gemm_simt<false, false, EpiBiasReluScale, false, 2, false>", 0),
             (dict(a=at, b=wt), "gemm_simt<false, true, EpiNone, false, 2, true>", gemm.geometry.SIMT_SMEM_BYTES),
             (dict(a=at, b=wt, epi="EpiBiasReluScale"), "gemm_simt<false, true, EpiBiasReluScale, false, 1, false>",
              0)]
    for kw, kernel, smem in cases:
        p = gplan(4096, 4096, 4096, **kw)
        assert (p.kernel, p.smem) == (kernel, smem), kw
    assert gemm.geometry.SIMT_SMEM_BYTES == 2 * 2 * 16 * (128 + 4) * 4   # both operands' two k-tile buffers
    p = gplan(1024, 1024, 1024)                                         # split-K
    assert (p.kernel, p.smem) == ("gemm_simt<true, false, EpiNone, true, 1, false>", 0)
    listed = gemm.variants()["gemm.cu"]
    assert all(kernel in listed for _, kernel, _ in cases)


def test_operand_preparation():
    # matmul's row-major b in TF32: the tensor cores read K-major only, so b.T is transposed
    # by the tiled kernel; a 16-bit row-major b is read in place (N-major)
    assert gplan(300, 200, 100, tf32=True, algo="tc").b.prep == "transpose"
    assert gplan(300, 200, 128, torch.bfloat16).b.prep == "n-major"
    assert gplan(300, 200, 100, torch.bfloat16).b.prep == "transpose"   # 200-byte rows: not a TMA pitch
    # linear_relu_div: b = weight.T of a row-major weight, read in place (K-major)
    w = rowmajor(100, 200, torch.bfloat16)
    p = gplan(300, 200, 100, torch.bfloat16, b=w.T, epi="EpiBiasReluScale")
    assert p.b.prep == "as is" and p.kernel == "gemm_wgmma<bf16, false, 128, 1, EpiBiasReluScale>"
    # rows that do not start on 16-byte boundaries (x[:, 1:]) are copied for the tensor cores
    a = Matrix(300, 199, 200, 1, 2, False)
    assert gplan(300, 199, 100, torch.bfloat16, a=a).a.prep == "k-major copy"
    # the CUDA-core kernel reads transposed views in place and copies only gapped views
    p = gplan(300, 200, 100, a=colmajor(300, 200), b=colmajor(200, 100))
    assert (p.a.prep, p.a.kmajor, p.b.prep, p.b.kmajor) == ("as is", False, "as is", True)
    gapped = Matrix(200, 100, 300, 3, 4, True)
    assert gplan(300, 200, 100, b=gapped).b == gemm.Operand("contiguous copy", False, 100, True)


@pytest.mark.parametrize("tf32", [False, True])
def test_accurate_ignores_the_tf32_switch(tf32):
    """algo="accurate" plans float32 on the fp32-accurate kernels whatever torch's TF32 switch
    says: fp16x3 from 2^33 multiply-adds on Hopper, tf32x3 below, simt elsewhere; never a TF32
    product (wgmma / tc); 16-bit as "auto" (the tensor cores)."""
    for M, K, N, hopper in ((4096, 4096, 4096, "fp16x3"), (2048, 2048, 2048, "fp16x3"), (2048, 2047, 2048, "tf32x3"),
                            (1024, 1024, 1024, "tf32x3"), (3, 5, 7, "tf32x3")):
        assert gplan(M, K, N, algo="accurate", tf32=tf32).family == hopper, (M, K, N)
        assert gplan(M, K, N, algo="accurate", tf32=tf32, dev=A100).family == "simt", (M, K, N)
        assert gplan(M, K, N, algo="auto", tf32=tf32).family == ("wgmma" if tf32 else "simt")
    assert gplan(64, 64, 64, torch.bfloat16, algo="accurate", tf32=tf32).family == "wgmma"
    assert gplan(64, 64, 64, torch.bfloat16, algo="accurate", tf32=tf32, dev=A100).family == "tc"
    assert gplan(64, 64, 64, torch.float64, algo="accurate", tf32=tf32).family == "naive"


def test_k_zero_on_hopper_takes_the_tc_kernel():
    p = gplan(64, 0, 64, torch.bfloat16)
    assert p.family == "tc" and "K == 0" in str(p)


def test_every_kernel_a_plan_names_is_registered():
    registered = {f: set(v) for f, v in gemm.variants().items()}
    layouts = lambda r, c, dt: [rowmajor(r, c, dt), colmajor(r, c, dt), Matrix(r, c, 3 * c, 3, ES[dt], True),
                                rowmajor(r, c, dt, aligned=False)]
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
    assert len(seen) >= 40   # the sweep reaches most variants


def test_sizes_past_32_bits_take_the_64_bit_kernel_or_are_refused_by_name():
    # stride-0 operands: no memory needed, the plan sees only shapes and strides
    big = 2**31
    wide_a, wide_b = Matrix(1, big, 0, 0, 4, True), Matrix(big, 1, 0, 0, 4, True)
    assert gemm.plan(1, 1, big, torch.float32, wide_a, wide_b, "EpiNone", H100).family == "naive"
    assert gemm.plan(1, big, 1, torch.bfloat16, Matrix(1, 1, 1, 1, 2, True), Matrix(1, big, 0, 0, 2, True),
                          "EpiNone", H100).family == "naive"
    huge = 2**32 + 16
    assert gemm.plan(1, 1, huge, torch.float32, Matrix(1, huge, 0, 0, 4, True), Matrix(huge, 1, 0, 0, 4, True),
                          "EpiNone", H100).family == "naive"
    for algo in ("simt", "tc", "wgmma"):
        with pytest.raises(ValueError, match=rf"algo='{algo}' takes K up to 2147483647 \(32-bit sizes\), got "
                                             r"K = 2147483648"):
            gemm.plan(1, 1, big, torch.float32, wide_a, wide_b, "EpiNone", H100, algo=algo)
    assert gemm.plan(1, 1, big - 1, torch.float32, wide_a, wide_b, "EpiNone", H100).family == "simt"


def test_fp16x3_workspace_parts_are_disjoint_and_on_256_byte_boundaries():
    """fp16x3's one allocation a call (gemm.fp16x3.carve): each part (pieces, exponents, magnitudes)
    from a 256-byte boundary (the TMA reads a matrix from a 16-byte one), after the end of the
    part before it, the total covering the last; an empty part (no magnitudes for a K-major b)
    takes no room."""
    sizes = [3 * 2056 * 2, 3 * 2056 * 2, 4 * 3, 1, 0, 4 * 7, 257, 0]
    offsets, total = gemm.fp16x3.carve(sizes)
    assert all(o % 256 == 0 for o in offsets), offsets
    ends = [o + n for o, n in zip(offsets, sizes)]
    assert all(end <= nxt for end, nxt in zip(ends, offsets[1:])) and ends[-1] <= total, (offsets, total)
    assert offsets[4] == offsets[5] and total == offsets[-1], (offsets, total)


def test_tf32x3_transposes_b_where_c_transposed_would_not_fit_the_grid():
    """C^T's row tiles are the grid's y dimension: N past 65,535 tiles takes the transpose (a
    driver error before), and swap=True there is a ValueError naming the limit."""
    wide = 65535 * 128 + 1
    a = Matrix(64, 64, 64, 1, 4, True)
    for n, swapped in ((65535 * 128, True), (wide, False)):
        p = gemm.plan(64, n, 64, torch.float32, a, Matrix(64, n, n, 1, 4, True), "EpiNone", H100, algo="tf32x3")
        assert p.swap is swapped and p.grid[1] <= 65535
    with pytest.raises(ValueError, match="swap=True takes N up to 8388480"):
        gemm.plan(64, wide, 64, torch.float32, a, Matrix(64, wide, wide, 1, 4, True), "EpiNone", H100,
                  algo="tf32x3", swap=True)
