"""matmul (naive kernel) against an fp64 reference, with a rigorous rounding-error bound.

Tolerance: summing K products in precision u (fp32 accumulation: u = 2**-24; fp64: 2**-53)
errs by at most gamma_K = K*u / (1 - K*u) times sum_k |a_mk| |b_kn| (Higham, Accuracy and
Stability of Numerical Algorithms, sect. 3.1); rounding the result to the output dtype adds
one unit roundoff of that dtype times |c|. A wrong index or a missed term errs by O(|c|).
"""
import pytest
import torch

import cupy_ops
from conftest import ALL_DTYPES, HOPPER, UNIT_ROUNDOFF, require_algo
from cupy_ops.ops import gemm

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1, 1), (3, 5, 7), (127, 129, 128), (129, 128, 127), (64, 4097, 33), (257, 31, 4097),
          (0, 5, 3), (5, 3, 0), (5, 0, 3)]


def accumulation_roundoff(dtype):
    return UNIT_ROUNDOFF[torch.float64 if dtype == torch.float64 else torch.float32]


def assert_gemm_close(got, a, b, extra_abs=None, operand_roundoff=0.0):
    """``got`` equals a @ b (+ whatever ``extra_abs`` bounds) within the rounding-error bound.

    ``operand_roundoff``: the unit roundoff the kernel rounds its operands to first (TF32:
    2**-11), which perturbs each product by at most twice that, relative.
    """
    dtype = got.dtype
    K = a.shape[1]
    ref = a.double() @ b.double()
    u = accumulation_roundoff(dtype)
    gamma = K * u / (1 - K * u)
    # rounding in the subnormal range is absolute, not relative: up to half the smallest
    # subnormal of the accumulator at each of the K steps, and of the dtype at the final rounding
    def half_subnormal(t):
        return torch.finfo(t).smallest_normal * torch.finfo(t).eps / 2
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    tiny = K * half_subnormal(acc) + half_subnormal(dtype)
    absprod = a.double().abs() @ b.double().abs()
    bound = (gamma + 2 * operand_roundoff) * absprod + UNIT_ROUNDOFF[dtype] * ref.abs() + tiny
    if extra_abs is not None:
        bound = bound + extra_abs
    err = (got.double() - ref).abs()
    bad = ~(err <= bound)
    if bad.any():
        i = int((err / bound).nan_to_num(float("inf")).flatten().argmax())
        raise AssertionError(f"{int(bad.sum())} of {got.numel()} outside the rounding bound; worst (relative to its "
                             f"bound) at flat index {i}: error {err.flatten()[i].item():.3g}, bound "
                             f"{bound.flatten()[i].item():.3g}, exact {ref.flatten()[i].item():.3g}, got "
                             f"{got.flatten()[i].item():.3g}")


def matmul_planned(a, b, **plan_kw):
    """a @ b through a plan made with overrides (``tile_n``, ``split_k``): the public tuning path."""
    c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    return gemm.run(gemm.plan_for(a, b, "EpiNone", **plan_kw), a, b, c)


def linear_planned(x, w, bias, d, **plan_kw):
    """linear_relu_div through a plan made with overrides."""
    y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
    scale = float(torch.tensor(1.0 / d, dtype=torch.float32))   # d: a power of two here, exact
    return gemm.run(gemm.plan_for(x, w.t(), "EpiBiasReluScale", **plan_kw), x, w.t(), y, bias, scale)


# (algo, dtype) pairs: every kernel family with every dtype it serves
ALGO_DTYPES = [("naive", dt) for dt in ALL_DTYPES] + [("simt", torch.float32), ("auto", torch.float32),
                                                       ("auto", torch.bfloat16), ("auto", torch.float16),
                                                       ("tc", torch.bfloat16), ("tc", torch.float16),
                                                       ("tc", torch.float32), ("wgmma", torch.bfloat16),
                                                       ("wgmma", torch.float16), ("wgmma", torch.float32),
                                                       ("tf32x3", torch.float32), ("fp16x3", torch.float32)]
TF32_ROUNDOFF = 2.0**-11   # operands rounded to the nearest TF32 (mma.sync: cvt.rna; wgmma: the TMA load)
# 3xTF32: a = hi + lo with lo rounded to TF32 (< 2^-22 |a| lost per operand) and lo * lo
# dropped (< 2^-20 |a b|): < 1.5 x 2^-20 per product; 2 x roundoff = 2^-18 covers it with room
# for the tensor cores' accumulation, which truncates (1 ulp, not half) within each promoted
# partial sum (at these K the gamma_K term of the bound is far larger still). fp16x3's pieces
# have the same 11-bit significands (gemm_fp16x3.cuh), so the same bound, for values within
# 2^17 of their row's largest (randn's rows span less).
TF32X3_ROUNDOFF = 2.0**-19


def roundoff(algo, dtype):
    """Operand rounding of the kernel: TF32 for fp32 operands on tensor cores (3xTF32: its
    split's remainder)."""
    if dtype != torch.float32:
        return 0.0
    return TF32_ROUNDOFF if algo in ("tc", "wgmma") else TF32X3_ROUNDOFF if algo in ("tf32x3", "fp16x3") else 0.0


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
    for name, (a, b) in cases.items():
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

    prods = rna(a).double().unsqueeze(2) * rna(b).double().unsqueeze(0)   # exact products
    ref, absum = prods.sum(1), prods.abs().sum(1)
    bound = 8 * 2.0**-24 * absum + 1e-30
    got = cupy_ops.matmul(a, b, algo=algo).double()
    assert ((got - ref).abs() <= bound).all(), f"worst {(got - ref).abs().max().item():.3g}"
    lin = cupy_ops.linear_relu_div(a, b.t(), None, 1.0, algo=algo).double()
    assert ((lin - torch.relu(ref)).abs() <= bound).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_tensor_core_operand_transpose(dtype, cuda):
    """tc_operand brings a column-major view into K-major rows with 16-byte aligned pitch
    (the tiled transpose kernel): exact copy of every element, padding zeroed."""
    big = torch.randn(300, 200, device=cuda).to(dtype)
    for view in (big.t(), big[3:, 5:].t(), big[:33, :1].t(), big[:1, :77].t(), big[::2, :65].t(),
                 torch.randn(70001, 3, device=cuda).to(dtype).t()):
        op = gemm.common.kmajor_operand(gemm.Matrix.of(view))
        buf, ld = gemm.runtime.prepare(view, op), op.ld
        rows, k = view.shape
        assert ld % (16 // buf.element_size()) == 0 and buf.data_ptr() % 16 == 0
        assert buf.stride(0) == ld and torch.equal(buf[:, :k], view)
        if ld > k:
            assert torch.equal(buf[:, k:], torch.zeros_like(buf[:, k:]))


# (tile width, CTAs per cluster, persistent): every compiled Hopper variant, both grid kinds
WGMMA_VARIANTS = [(64, 1, False), (64, 1, True), (128, 1, False), (128, 2, True), (128, 2, False),
                  (256, 1, False), (256, 1, True), (256, 2, True)]


def wgmma_cases(shapes, dtype, cuda):
    """(M, K, N, a, b) for each shape: seeded randn operands of ``dtype`` (skips without a
    Hopper GPU)."""
    require_algo("wgmma")
    torch.manual_seed(0)
    for M, K, N in shapes:
        yield M, K, N, torch.randn(M, K, device=cuda).to(dtype), torch.randn(K, N, device=cuda).to(dtype)


@pytest.mark.parametrize("bn, cluster, persistent", WGMMA_VARIANTS, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_wgmma_every_tile_width_and_cluster(bn, cluster, persistent, dtype, cuda):
    """Each compiled variant of the Hopper kernel, whatever the shape tables would pick: tails
    in M, N and K, row-major (N-major) and K-major b, the fused epilogue; an odd number of tile
    rows (a cluster's second CTA past M) and a single one; a persistent grid that walks
    several tiles per cluster (4100 x 4100: 33 x 17 wide tiles for 132 SMs)."""
    kw = dict(algo="wgmma", tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
    for M, K, N, a, b in wgmma_cases([(300, 200, 520), (129, 64, 256), (8, 1000, 24), (4100, 72, 4100)], dtype, cuda):
        for bb in (b, b.t().contiguous().t()):
            got = matmul_planned(a, bb, **kw)
            assert_gemm_close(got, a, bb, operand_roundoff=roundoff("wgmma", dtype))
        bias = torch.randn(N, device=cuda).to(dtype)
        got = linear_planned(a, b.t(), bias, 2.0, **kw)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = (2 * roundoff("wgmma", dtype) + K * 2.0**-24 * 2) * absprod + 2 * UNIT_ROUNDOFF[dtype] * ref.abs() + 1e-6
        assert ((got.double() - ref).abs() <= tol).all()


@pytest.mark.parametrize("bn, cluster, persistent", WGMMA_VARIANTS, ids=str)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_wgmma_tma_stores_equal_the_threads_stores(bn, cluster, persistent, dtype, cuda):
    """The epilogue's two store paths write the same bits (same accumulation, same epilogue),
    for plain and fused outputs, and the TMA stores write nothing past M x N: rows and columns
    past the matrix (tails in both, a tile row past M, one row of 16-row boxes partly past M)
    are clipped, and the rows after C in the same allocation keep their sentinel."""
    kw = dict(algo="wgmma", tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
    for M, K, N, a, b in wgmma_cases([(300, 200, 520), (129, 64, 264), (8, 1000, 24), (1000, 72, 4104)], dtype, cuda):
        bias = torch.randn(N, device=cuda).to(dtype)
        for epi, bb, extra in (("EpiNone", b, ()), ("EpiBiasReluScale", b.t().contiguous().t(), (bias, 0.5))):
            outs = []
            for tma_store in (True, False):
                p = gemm.plan_for(a, bb, epi, tma_store=tma_store, **kw)
                assert p.tma_store == tma_store
                big = torch.full((M + 40, N), float("nan"), dtype=dtype, device=cuda)
                gemm.run(p, a, bb, big[:M], *extra)
                assert big[M:].isnan().all(), f"stores past row {M} ({p})"
                outs.append(big[:M])
            assert torch.equal(outs[0], outs[1]), f"{epi} M={M} K={K} N={N}"
            if epi == "EpiNone":
                assert_gemm_close(outs[0], a, bb, operand_roundoff=roundoff("wgmma", dtype))


@pytest.mark.parametrize("bn, cluster, persistent", WGMMA_VARIANTS, ids=str)
def test_wgmma_swapped_tf32_every_variant(bn, cluster, persistent, cuda):
    """TF32 with a row-major b computed as C^T = B^T A^T (B^T through the wgmma's registers, C
    stored transposed by the TMA), each compiled variant: against the bound and against the
    transpose pass's result; tails in M, N (a multiple of 4: C's rows a TMA pitch) and K; one
    row, one tile row, a cluster's second CTA past N, a persistent walk over several tiles;
    b with rows offset (b[1:]) or wider apart than N; the fused epilogue (a column-major
    weight); nothing stored past M x N (the rows after C keep their sentinel)."""
    kw = dict(algo="wgmma", tile_n=bn, split_k=False, cluster=cluster, persistent=persistent)
    dtype = torch.float32
    for M, K, N, a, b in wgmma_cases([(300, 200, 520), (129, 64, 256), (8, 1000, 24), (4100, 72, 4100), (1, 33, 4),
                                      (257, 31, 132)], dtype, cuda):
        wide = torch.randn(K + 1, N + 12, device=cuda)
        for bb in (b, wide[1:, :N], wide[:K, 4:N + 4]):
            p = gemm.plan_for(a, bb, "EpiNone", swap=True, **kw)
            assert p.swap and p.kernel == f"gemm_wgmma_swap<{bn}, {cluster}, EpiNone>", p
            big = torch.full((M + 40, N), float("nan"), device=cuda)
            gemm.run(p, a, bb, big[:M])
            assert big[M:].isnan().all(), f"stores past row {M} ({p})"
            assert_gemm_close(big[:M], a, bb, operand_roundoff=roundoff("wgmma", dtype))
            unswapped = matmul_planned(a, bb, swap=False, **kw)
            tol = 4 * K * 2.0**-24 * (a.double().abs() @ bb.double().abs()) + 1e-30
            assert ((big[:M].double() - unswapped.double()).abs() <= tol).all(), "swapped and transposed paths differ"
        bias = torch.randn(N, device=cuda)
        p = gemm.plan_for(a, b, "EpiBiasReluScale", swap=True, **kw)   # linear's b = weight.T = b: row-major
        assert p.swap
        got = gemm.run(p, a, b, torch.empty(M, N, device=cuda), bias, 0.5)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = (2 * roundoff("wgmma", dtype) + K * 2.0**-24 * 2) * absprod + 2 * UNIT_ROUNDOFF[dtype] * ref.abs() + 1e-6
        assert ((got.double() - ref).abs() <= tol).all()


def check_one_tile_per_cta(dtype, cuda, kernel, tile, **force):
    """The kernels with one output tile per CTA and their epilogue staged in the ring (``force``:
    the plan override that asks for one; ``kernel``: its name's start; ``tile``: its tile):
    against the bound, both b layouts (a row-major fp32 b is transposed first), the fused
    epilogue, the TMA's and the threads' stores; K of one partial k-tile up to thousands, tails
    in M (a tile partly past M) and N, one row; nothing stored past M (the rows after C keep
    their sentinel); deterministic."""
    for M, K, N, a, b in wgmma_cases([(300, 1000, 520), (129, 3, 256), (1, 64, 8), (1024, 1024, 1024),
                                      (8, 3000, 136), (65, 200, 130), (127, 4097, 129)], dtype, cuda):
        for bb in (b, b.t().contiguous().t()):
            for tma_store in ((True, False) if (N * a.element_size()) % 16 == 0 else (False,)):
                p = gemm.plan_for(a, bb, "EpiNone", "wgmma", tma_store=tma_store, **force)
                assert p.kernel.startswith(kernel) and p.tile == tile and not p.persistent, p
                big = torch.full((M + 40, N), float("nan"), dtype=dtype, device=cuda)
                gemm.run(p, a, bb, big[:M])
                assert big[M:].isnan().all(), f"stores past row {M} ({p})"
                assert_gemm_close(big[:M], a, bb, operand_roundoff=roundoff("wgmma", dtype))
        bias = torch.randn(N, device=cuda).to(dtype)
        got = linear_planned(a, b.t().contiguous(), bias, 2.0, algo="wgmma", **force)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = (2 * roundoff("wgmma", dtype) + (K + 1) * 2.0**-24 * 2) * absprod + 2 * UNIT_ROUNDOFF[dtype] * ref.abs() + 1e-6
        assert ((got.double() - ref).abs() <= tol).all()
    torch.manual_seed(1)
    a = torch.randn(256, 2048, device=cuda).to(dtype)
    b = torch.randn(2048, 512, device=cuda).to(dtype)
    first = matmul_planned(a, b, algo="wgmma", **force)
    assert all(torch.equal(first, matmul_planned(a, b, algo="wgmma", **force)) for _ in range(3))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_wgmma_ksplit_splits_k_between_the_warpgroups(dtype, cuda):
    """64 x 128 tiles with the two consumer warpgroups each over half of every k-tile, summed
    in shared memory (gemm_wgmma_ksplit)."""
    check_one_tile_per_cta(dtype, cuda, "gemm_wgmma_ksplit<", (64, 128), ksplit=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_wgmma_single_stages_its_epilogue_in_the_ring(dtype, cuda):
    """128 x 64 tiles of the plain kernel, one per CTA, the epilogue's buffers in the ring
    (gemm_wgmma_single): the same sums as the plain kernel's 128 x 64 tiles, bit for bit."""
    check_one_tile_per_cta(dtype, cuda, "gemm_wgmma_single<", (128, 64), single=True)
    for M, K, N, a, b in wgmma_cases([(300, 1000, 520), (65, 200, 130)], dtype, cuda):
        plain = matmul_planned(a, b, algo="wgmma", tile_n=64, cluster=1, persistent=False, split_k=False, ksplit=False)
        assert torch.equal(matmul_planned(a, b, algo="wgmma", single=True), plain)


def test_wgmma_swapped_tf32_is_what_auto_runs_and_keeps_specials(cuda):
    """Under torch's TF32 switch, "auto" on Hopper takes the swapped kernel for a row-major b
    (no transpose pass) and the transpose pass where it cannot (N not a multiple of 4, b's
    rows off a 16-byte boundary); NaN, inf and -0.0 come out as torch's TF32 matmul gives them."""
    require_algo("wgmma")
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        a = torch.randn(192, 96, device=cuda)
        b = torch.randn(96, 260, device=cuda)
        assert cupy_ops.gemm_plan(a, b).swap
        assert not cupy_ops.gemm_plan(a, b[:, :257]).swap and not cupy_ops.gemm_plan(a, b[:, 1:257]).swap
        a[3, 5], a[7, :] = float("nan"), 0.0
        b[2, 9], b[:, 11] = float("inf"), -0.0
        a[10, :] = -0.0
        got, want = cupy_ops.matmul(a, b), a @ b
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        finite = want.isfinite()
        assert torch.equal(got[finite].signbit() & (got[finite] == 0), want[finite].signbit() & (want[finite] == 0))
        assert torch.allclose(got[finite], want[finite], atol=1e-2, rtol=1e-2)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


@pytest.mark.parametrize("M, K, N", [(64, 4097, 33), (256, 1024, 1024), (129, 300, 250)])
def test_simt_split_k_matches_the_bound_and_is_deterministic(M, K, N, cuda):
    """The SIMT kernel's split-K (small grids: slices of K into a workspace, summed in order)
    and the unsplit kernel both stay within the rounding bound; repeated calls are identical."""
    torch.manual_seed(0)
    a, b = torch.randn(M, K, device=cuda), torch.randn(K, N, device=cuda)
    w, bias = torch.randn(N, K, device=cuda), torch.randn(N, device=cuda)
    assert cupy_ops.gemm_plan(a, b, algo="simt").slices > 1 or K < 2 * gemm.tables.SIMT_SPLIT_MIN_K
    split = cupy_ops.matmul(a, b, algo="simt")
    assert torch.equal(split, cupy_ops.matmul(a, b, algo="simt"))
    assert_gemm_close(split, a, b)
    lin = cupy_ops.linear_relu_div(a, w, bias, 2.0, algo="simt")
    assert_gemm_close(matmul_planned(a, b, algo="simt", split_k=False), a, b)
    unsplit = linear_planned(a, w, bias, 2.0, algo="simt", split_k=False)
    ref = torch.relu(a.double() @ w.double().t() + bias.double()) / 2
    tol = ((K + 1) * 2.0**-24 * 1.01 * (a.double().abs() @ w.double().abs().t() + bias.double().abs()) / 2
           + 2.0**-24 * ref.abs() + 1e-30)
    for got in (lin, unsplit):
        assert ((got.double() - ref).abs() <= tol).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_wgmma_split_k(dtype, cuda):
    """The Hopper kernel's split-K (small outputs, long K: fp32 partial slices summed in
    order, then rounded to the dtype / put through the fused epilogue) against the bound and
    against the unsplit kernel's bound; N-major and K-major b."""
    require_algo("wgmma")
    torch.manual_seed(0)
    M, K, N = 200, 3000, 136
    a = torch.randn(M, K, device=cuda).to(dtype)
    b = torch.randn(K, N, device=cuda).to(dtype)
    bias = torch.randn(N, device=cuda).to(dtype)
    assert cupy_ops.gemm_plan(a, b, algo="wgmma").slices > 1
    # split, split in clusters of 2 (a persistent grid over the slices), unsplit
    for kw in (dict(split_k=True), dict(split_k=True, cluster=2, persistent=True), dict(split_k=False)):
        for bb in (b, b.t().contiguous().t()):
            got = matmul_planned(a, bb, algo="wgmma", **kw)
            assert_gemm_close(got, a, bb, operand_roundoff=roundoff("wgmma", dtype))
        lin = linear_planned(a, b.t(), bias, 2.0, algo="wgmma", **kw)
        ref = torch.relu(a.double() @ b.double() + bias.double()) / 2
        absprod = (a.double().abs() @ b.double().abs() + bias.double().abs()) / 2
        tol = ((2 * roundoff("wgmma", dtype) + (K + 1) * 2.0**-24 * 1.01) * absprod
               + 2 * UNIT_ROUNDOFF[dtype] * ref.abs() + 1e-6)
        assert ((lin.double() - ref).abs() <= tol).all()


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


@pytest.mark.slow
def test_sizes_past_32_bits_are_computed_in_64_bit_or_refused_by_name(cuda):
    """K = 2**31 from stride-0 operands (no memory): the tiled kernels (32-bit sizes) refuse it
    naming K; "auto" takes the naive kernel, whose sizes and indices are 64-bit: the float64
    sum of 2**31 ones is exact (one thread adds them: ~10 s)."""
    K = 2**31
    ones = lambda *shape, dtype=torch.float32: torch.ones(1, 1, device=cuda, dtype=dtype).expand(*shape)  # noqa: E731
    for algo in ("simt", "tc", "wgmma", "tf32x3", "fp16x3"):
        with pytest.raises(ValueError, match=rf"algo='{algo}' takes K up to 2147483647 \(32-bit sizes\), got K"):
            cupy_ops.matmul(ones(1, K), ones(K, 1), algo=algo)
    assert cupy_ops.gemm_plan(ones(1, K), ones(K, 1)).family == "naive"
    assert cupy_ops.gemm_plan(ones(1, 1), ones(1, K)).family == "naive"          # N = 2**31
    assert cupy_ops.matmul(ones(1, K, dtype=torch.float64), ones(K, 1, dtype=torch.float64)).item() == float(K)
