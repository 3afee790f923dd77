"""algo="fp16x3" (fp32 on the Hopper fp16 tensor cores: three products of row-scaled fp16
pieces): the split's pieces bit for bit, NaN / inf placement as torch fp32's, gradients, its
documented range contract, rows of very different magnitudes, operand layouts; and the models'
choice between it and 3xTF32. (Its error next to torch fp32's at the benchmark shapes and at odd
ones, split-K and tall M: test_tf32x3.py, for both; shapes, strides, K = 0, both
epilogues and denormals against the rounding bound: test_matmul.py and test_linear_relu_div.py,
which run every algo.)"""

import pytest
import torch

import cupy_ops
from cupy_ops.models import linear_relu_div, matmul
from cupy_ops.ops import gemm
from cupy_ops.ops.gemm.fp16x3 import split_ring, split_rows

import fp16x3_passes
from conftest import HOPPER, require_algo
from gemm_checks import assert_gemm_close, roundoff, shifted, torch_fp32
from gemm_plans import A100, H100, gplan, rowmajor


def contract_bound(a, b):
    """matmul's documented bound for fp16x3, per output: for the operands a' and b' it splits
    (``shifted``), each value x of a row (of a') or column (of b') whose largest finite
    magnitude is X kept to 2^-21 |x| plus 2^-38 X (2^-37 and 2^-18 with room for the dropped
    lo * lo and the tensor cores' truncation within a promoted partial sum), and fp32's
    gamma_K; the product of two such absolute errors, 2^-76 X_a X_b a term; and the output's
    own rounding where it is subnormal (fp32's absolute 2^-150, twice for the scaling back in
    two steps past 2^-126)."""
    a64, b64 = shifted(a, b)
    fa, fb = a64.nan_to_num(0, 0, 0).abs(), b64.nan_to_num(0, 0, 0).abs()
    xa, xb = fa.amax(1, keepdim=True), fb.amax(0, keepdim=True)
    K = a.shape[1]
    absprod = fa @ fb
    lost = xa * fb.sum(0, keepdim=True) + fa.sum(1, keepdim=True) * xb
    return (K * 2.0**-24 * 1.01 + 2.0**-18) * absprod + 2.0**-37 * lost + K * 2.0**-76 * xa * xb + 2.0**-148


def split_reference(x, shift=None):
    """fp16x3_split's pieces computed by torch: (hi bits, lo bits, exponents) of x (rows, K) fp32,
    value k times 2^shift[k] (float64 exponents, (K,), or none) first, exactly. Each row scaled
    by 2^e (its largest finite shifted magnitude into [2^14, 2^15); e = 0 for a row with none
    nonzero), hi = the scaled value truncated to fp16, lo = the remainder rounded to fp16;
    a nonzero x whose hi is 0 gets hi = lo = +-2^-24 (x's sign), one whose lo is 0 or that is
    infinite lo = +-2^-24."""
    s = torch.zeros(x.shape[1], dtype=torch.float64, device=x.device) if shift is None else shift
    mag = (torch.where(x.isfinite(), x.abs(), 0).double() * torch.exp2(s)).amax(1)
    e = torch.where(mag > 0, 15 - torch.frexp(mag)[1], 0)  # mag = m 2^p, m in [0.5, 1): floor(log2) = p - 1
    # exact, then one rounding (as the kernel's, but for values 2^-126 below fp32's normals: lost either way)
    xs = (x.double() * torch.exp2(e.double()[:, None] + s)).float()
    h = xs.half()
    hb = h.view(torch.int16)
    hb = torch.where(h.float().abs() > xs.abs(), hb - 1, hb)  # round to nearest -> toward zero
    lb = (xs - hb.view(torch.float16).float()).half().view(torch.int16)
    nonzero = (x != 0) | x.isnan()
    tiny = torch.where(x.signbit(), -32767, 1).to(torch.int16)  # 0x8001 / 0x0001: +-2^-24
    hi_zero = nonzero & ((hb & 0x7FFF) == 0)
    lo_tiny = nonzero & ~hi_zero & (((lb & 0x7FFF) == 0) | x.isinf())
    hb = torch.where(hi_zero, tiny, hb)
    lb = torch.where(hi_zero | lo_tiny, tiny, lb)
    return hb, lb, e.int()


HELD = gemm.geometry.X3H_SPLIT_THREADS * gemm.geometry.X3H_SPLIT_VECS * 4  # values of a row a split block holds


def operand_rows(layout, rows, K, cuda):
    """An fp32 (rows, K) operand to split, as b^T: "rows" K contiguous (b K-major); "n-major"
    a row-major b's columns (rows 16-byte aligned: split in place, N-major); "columns" the
    same with b's rows 3 rows plus one element off 16 bytes apart and b 4 bytes off alignment
    (transposed first)."""
    if layout == "rows":
        return torch.empty(rows, K, device=cuda)
    if layout == "n-major":
        return torch.empty(K, rows + 4, device=cuda)[:, :rows].t()
    return torch.empty(K, rows + 5, device=cuda)[:, 1 : rows + 1].t()


# rows of b the N-major split's grids cover before they stride
NSPLIT_ALL = 65535 * max(gemm.geometry.X3H_NSPLIT_ROWS, gemm.geometry.X3H_COLMAX_ROWS)


@pytest.mark.parametrize("layout", ["rows", "n-major", "columns"])
@pytest.mark.parametrize("K", [1, 3, 5, 256, 1027, HELD - 1, HELD, HELD + 5, 2 * HELD + 3619, NSPLIT_ALL + 37])
def test_split_pieces_are_bit_exact(K, layout, cuda):
    """The operand's pieces (fp16x3_split, after the transpose pass or a K-major copy where the
    plan takes one; fp16x3_colmax_n + fp16x3_split_n for a row-major b) against their
    definition in torch, bit for bit, at row widths around the part a block holds in
    registers (HELD values: the rest is read twice), the scalar tail (K % 4), past the rows
    the N-major split's grid covers: rows whose largest value sits in the first, a middle or
    the last element or past the held part, special values, a row of zeros, a row of -0.0,
    subnormal and huge rows, values lost to their row's scale, fp16-exact ones; and the
    exponents."""
    require_algo("fp16x3")
    torch.manual_seed(K)
    rows = 12
    x = operand_rows(layout, rows, K, cuda)
    x.copy_(torch.randn(rows, K, device=cuda) * torch.exp2(torch.randint(-40, 41, (rows, 1), device=cuda).float()))
    for r, col in ((0, 0), (1, K // 2), (2, K - 1), (3, min(K - 1, HELD + 3)), (4, min(K - 1, 4 * (K // 4)))):
        x[r, col] = 1e4 * x[r].abs().max()
    x[5] = 0.0
    x[6] = -0.0
    x[7] = 1e-41 * torch.rand(K, device=cuda)
    x[8] = torch.randn(K, device=cuda) * 2.0**120
    specials = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1e-40, -1e-45], device=cuda)
    idx = torch.randint(0, K, (min(K, 20),), device=cuda)
    x[9, idx] = specials[torch.randint(0, len(specials), idx.shape, device=cuda)]
    x[10, :] = float("inf")
    x[11] = torch.randint(-8, 9, (K,), device=cuda).float()  # fp16-exact: remainders 0
    p = gemm.plan_for(torch.ones(8, K, device=cuda), x.t(), "EpiNone", "fp16x3")  # x as b^T, the split's rows
    assert p.b.prep == (
        "n-major split"
        if layout == "n-major"
        else "transpose"
        if layout == "columns" and K > 1
        else "as is"
        if K % 4 == 0
        else "k-major copy"
    ), p
    # unshifted, then each value k times 2^-t[k] as b's are: t drawn over its bytes' range, and
    # t as fp16x3 takes it from b's rows (x's columns)
    drawn = torch.randint(-126, 127, (K,), device=cuda, dtype=torch.int8)
    t = fp16x3_passes.b_shifts(x.t(), p.b)
    mag = torch.where(x.isfinite(), x.abs(), 0).amax(0).double()
    assert torch.equal(t, torch.where(mag > 0, torch.frexp(mag)[1] - 1, 0).clamp(-126, 126).to(torch.int8)), "t differs"
    for tk in (None, drawn, t) + (("rows",) if layout == "n-major" else ()):
        if layout == "n-major":  # "rows": t and the columns' keys in one pass (fp16x3_rowcolmax), as matmul's
            pieces, ex, own = fp16x3_passes.pieces_n(x.t(), p.b, tk)
            if isinstance(tk, str):
                assert torch.equal(own, t), "t of the one pass differs"
                tk = own
        shift = None if tk is None else -tk.double()
        if layout == "n-major":
            pieces = pieces[:, :, :rows].transpose(1, 2)  # (2, K, N) -> (2, N, K): b^T's rows
        else:
            pieces, ex = fp16x3_passes.pieces(x, p.b, tk, kneg=True)
        hb, lb, e = split_reference(x, shift)
        what = "unshifted" if tk is None else "shifted"
        assert torch.equal(ex, e), f"{what}: exponents differ in rows {(ex != e).nonzero().flatten().tolist()}"
        for name, got, want in (("hi", pieces[0, :, :K], hb), ("lo", pieces[1, :, :K], lb)):
            nan = x.isnan()
            assert got.isnan().equal(nan), f"{what} {name}: NaN placement differs"
            gb = got.view(torch.int16)
            bad = (gb != want) & ~nan
            assert not bad.any(), (
                f"{what} {name}: {int(bad.sum())} pieces differ, first at "
                f"{bad.nonzero()[0].tolist()}: {int(gb[bad][0]):#06x} instead of "
                f"{int(want[bad][0]):#06x}"
            )


RING_KS = [4, 1027] + [k for max_k, _, _ in gemm.geometry.X3H_RINGS for k in (max_k - 3, max_k)]


@pytest.mark.parametrize("K", RING_KS)
def test_a_split_block_walking_many_rows_gives_each_rows_pieces(K, cuda):
    """Rows within X3H_RINGS go through fp16x3_split_ring, a persistent grid whose blocks take
    several rows each through a ring of shared-memory buffers (a buffer refilled, the barriers'
    phases turning over): more than three rows a block of the widest grid, rows of the rare
    scale (huge, subnormal) among them, the scalar tail; the pieces and exponents bit for bit as
    the definition."""
    require_algo("fp16x3")
    most = split_ring(K, cuda.index)[3]
    g = torch.Generator(device=cuda).manual_seed(K)
    rows = 3 * most + 517
    x = torch.randn(rows, K, device=cuda, generator=g)
    x *= torch.exp2(torch.randint(-40, 41, (rows, 1), device=cuda, generator=g).float())
    x[::97] *= 2.0**80
    x[5::101] = 1e-41  # (subnormal rows: the split by the keys)
    p = gemm.plan_for(torch.ones(8, K, device=cuda), x.t(), "EpiNone", "fp16x3")
    assert split_rows(x, p.b, 0, 0, 0, 0)[1][0] == most, "the ring's grid: as many blocks as the SMs hold"
    pieces, ex = fp16x3_passes.pieces(x, p.b)
    hb, lb, e = split_reference(x, None)
    assert torch.equal(ex, e), f"exponents differ in rows {(ex != e).nonzero().flatten()[:10].tolist()}"
    for name, got, want in (("hi", pieces[0, :, :K], hb), ("lo", pieces[1, :, :K], lb)):
        bad = got.view(torch.int16) != want
        assert not bad.any(), f"{name}: {int(bad.sum())} pieces differ, first at {bad.nonzero()[0].tolist()}"


ROWCOL_N = 4 * max(gemm.geometry.X3H_ROWCOL_JS) * gemm.geometry.X3H_ROWCOL_THREADS  # widest row a block holds


@pytest.mark.parametrize("K, N", [(1, 5), (300, 2047), (5000, 2049), (9000, 4100), (700, ROWCOL_N), (40, ROWCOL_N + 4)])
def test_one_pass_over_b_gives_the_two_passes_t_and_column_scales(K, N, cuda):
    """fp16x3_rowcolmax (a row-major b's t and its columns' keys over the shifted rows, one read,
    as matmul takes them; fp16x3_rowmax + fp16x3_colmax_n past ROWCOL_N columns) against the
    definition bit for bit, the pieces after it too: every J (float4 of a row a thread), blocks
    of one row to 64, their last step part-filled, rows 2^-60 .. 2^60 and columns 2^-20 .. 2^20
    apart, rows of zeros, -0.0, inf, subnormals, huge values and NaN, a row's largest in its
    last column, columns whose values are subnormal once shifted (their keys not those of the
    rounded products), one of them rounding up to 2^-126, one to 0."""
    require_algo("fp16x3")
    g = torch.Generator(device=cuda).manual_seed(K + N)
    b = torch.empty(K, -(-N // 4) * 4, device=cuda)[:, :N]  # rows 16-byte aligned: split in place
    b.copy_(
        torch.randn(K, N, device=cuda, generator=g)
        * torch.exp2(torch.randint(-60, 61, (K, 1), device=cuda, generator=g).float())
        * torch.exp2(torch.randint(-20, 21, (1, N), device=cuda, generator=g).float())
    )
    for r, v in enumerate((0.0, -0.0, float("inf"), 1e-41, 2.0**120)):
        if r < K:
            b[r] = v * (torch.rand(N, device=cuda, generator=g) + 0.5) if v not in (0.0, float("inf")) else v
    if K > 6:
        b[5, ::7] = float("nan")
        b[6, -1] = 1e4 * b[6].abs().max()
    big = torch.where(b.isfinite(), b.abs(), 0).amax(1).double()
    if N > 2:  # column 2: (1 + u) 2^-148 once shifted, subnormal, half of them rounding up a binade
        u = torch.rand(K, device=cuda, generator=g, dtype=torch.float64)
        tiny = (1 + u) * torch.exp2(torch.frexp(big)[1] - 149.0)
        b[:, 2] = torch.where(big > 0, tiny.float(), b[:, 2])  # (rows of zeros or of infs kept)
    if N > 3:  # column 3: (2 - 2^-23) 2^-127 once shifted, which rounds up to 2^-126, a normal float
        edge = (2 - 2.0**-23) * torch.exp2(torch.frexp(big)[1] - 128.0)
        b[:, 3] = torch.where(big >= 2, edge.float(), 0.0)
    if N > 4:  # column 4: (1 + u) 2^-151 once shifted, which rounds to 0 (to nearest), in rows that hold it
        dust = (1 + u) * torch.exp2(torch.frexp(big)[1] - 152.0)
        b[:, 4] = torch.where(big >= 2.0**4, dust.float(), 0.0)
    b[:, 0] = 0.0
    p = gemm.plan_for(torch.empty(N, K, device=cuda), b, "EpiNone", "fp16x3")  # M >= N: t from b's rows
    assert p.b.prep == "n-major split", p
    assert ("fp16x3_rowcolmax" in p.notes[0]) == (N <= ROWCOL_N), p.notes
    pieces, ex, t = fp16x3_passes.pieces_n(b, p.b, "rows")
    mag = torch.where(b.isfinite(), b.abs(), 0).amax(1).double()
    want_t = torch.where(mag > 0, torch.frexp(mag)[1] - 1, 0).clamp(-126, 126).to(torch.int8)
    assert torch.equal(t, want_t), f"t differs at rows {(t != want_t).nonzero().flatten()[:10].tolist()}"
    hb, lb, e = split_reference(b.t(), -t.double())
    assert torch.equal(ex, e), f"exponents differ at columns {(ex != e).nonzero().flatten()[:10].tolist()}"
    nan = b.t().isnan()
    for name, got, want in (("hi", pieces[0, :, :N].t(), hb), ("lo", pieces[1, :, :N].t(), lb)):
        bad = (got.view(torch.int16) != want) & ~nan
        assert got.isnan().equal(nan) and not bad.any(), f"{name}: {int(bad.sum())} pieces differ"


@pytest.mark.parametrize("top", [39, 40, 41, 253, 254, 255])
@pytest.mark.parametrize("kneg", [False, True], ids=["2^t", "2^-t"])
def test_split_rows_at_the_ends_of_the_two_multiply_range_match_their_definition(top, kneg, cuda):
    """fp16x3_split scales a row by two multiplies, (x 2^s) 2^e, where its largest shifted
    magnitude's biased exponent is in [40, 254], and by its keys otherwise (255: a value whose
    shift overflowed): rows whose largest shifted value has exponent ``top``, with the rest
    spread 70 binades below it (shifted values subnormal, rounded or 0), match the definition
    (one rounding of x 2^(e+s)) bit for bit, as do their exponents."""
    require_algo("fp16x3")
    g = torch.Generator(device=cuda).manual_seed(top)
    rows, K = 6, 1027
    tk = torch.randint(2, 21, (K,), device=cuda, dtype=torch.int8, generator=g)
    tk[: K // 2] *= -1
    s = (-tk if kneg else tk).double()
    exps = (top - 127) - torch.randint(0, 71, (rows, K), device=cuda, generator=g).double() - s
    mant = 1 + torch.rand(rows, K, device=cuda, generator=g, dtype=torch.float64)
    sign = torch.where(torch.rand(rows, K, device=cuda, generator=g) < 0.5, -1.0, 1.0).double()
    x64 = sign * mant * torch.exp2(exps.clamp(max=126))  # fp32-finite
    up = (s > 0).nonzero().flatten()  # the largest where 2^(top - 127 - s) is an fp32 value
    col = up[torch.randint(0, len(up), (rows,), device=cuda, generator=g)]
    x64[torch.arange(rows, device=cuda), col] = 1.75 * torch.exp2((top - 127) - s[col])
    x = x64.float()
    assert x.isfinite().all()
    p = gemm.plan_for(torch.ones(8, K, device=cuda), x.t(), "EpiNone", "fp16x3")
    pieces, ex = fp16x3_passes.pieces(x, p.b, tk, kneg=kneg)
    hb, lb, e = split_reference(x, s)
    assert torch.equal(ex, e), f"exponents {ex.tolist()} instead of {e.tolist()}"
    for name, got, want in (("hi", pieces[0, :, :K], hb), ("lo", pieces[1, :, :K], lb)):
        bad = got.view(torch.int16) != want
        assert not bad.any(), f"{name}: {int(bad.sum())} pieces differ, first at {bad.nonzero()[0].tolist()}"


# (M, N, K, b's layout, fp16x3.route): each way of making t (matmul's b row-major, a Linear's
# weight.T K-major)
ROUTES = [
    (512, 256, 384, "row-major", "rowcol"),
    (256, 512, 384, "row-major", "a"),
    (8320, 8320, 64, "row-major", "rows"),  # rows too wide for a block
    (256, 512, 384, "k-major", "a"),
    (512, 256, 384, "k-major", "b"),
]


@pytest.mark.parametrize("M, N, K, b_layout, way", ROUTES)
def test_accumulators_are_left_zero_and_each_call_equals_runs(M, N, K, b_layout, way, cuda):
    """t's kernel accumulates in the stream's ``launch.accumulators``, shared by every shape,
    and leaves them zero: after other shapes' calls, calls on large, then small, then large
    values give what ``run`` gives (its workspace zeroed a call) bit for bit, and the
    accumulators are zero after each. Maxima or a count left there would scale the next call's columns wrongly."""
    require_algo("fp16x3")
    from cupy_ops import launch
    from cupy_ops.ops.gemm import fp16x3

    g = torch.Generator(device=cuda).manual_seed(M + N)
    a = torch.randn(M, K, device=cuda, generator=g)
    bs = [torch.randn(K, N, device=cuda, generator=g) * s for s in (2.0**40, 2.0**-40, 2.0**20)]
    if b_layout == "k-major":
        bs = [b.t().contiguous().t() for b in bs]
    p = gemm.plan_for(a, bs[0], "EpiNone", "fp16x3")
    assert fp16x3.route(p, M, N) == way, p
    for shape in SHAPES_BEFORE:  # other shapes' calls first: the same accumulators, other sizes
        cupy_ops.matmul(torch.randn(*shape[:2], device=cuda), torch.randn(*shape[1:], device=cuda), algo="fp16x3")
    for b in bs:
        got = cupy_ops.matmul(a, b, algo="fp16x3")
        want = torch.empty_like(got)
        fp16x3.run(p, a, b, want, gemm.epilogues.NO_ARGS)
        assert torch.equal(got, want), f"{way}: {(got != want).sum().item()} values differ from run's"
        acc = launch._accumulators[(cuda.index, torch.cuda.current_stream(cuda).cuda_stream)]
        assert not acc.any(), f"{way}: accumulators left nonzero at bytes {acc.nonzero().flatten()[:8].tolist()}"


SHAPES_BEFORE = [(300, 700, 200), (200, 500, 900)]  # (M, K, N): t from b's rows, then from a's columns


def test_threads_and_streams_at_once_each_get_runs_values(cuda):
    """Three threads calling at once, two on the default stream (sharing its accumulators, their
    kernels interleaved there) and one on a side stream (its own), each of a shape that makes t
    another way: every output equals ``run``'s (its workspace zeroed a call) bit for bit."""
    require_algo("fp16x3")
    import threading

    from cupy_ops.ops.gemm import fp16x3

    g = torch.Generator(device=cuda).manual_seed(5)
    cases = []
    for M, K, N in [(512, 384, 256), (256, 384, 512), (640, 200, 328)]:
        a, b = torch.randn(M, K, device=cuda, generator=g), torch.randn(K, N, device=cuda, generator=g) * 2.0**30
        want = torch.empty(M, N, device=cuda)
        fp16x3.run(gemm.plan_for(a, b, "EpiNone", "fp16x3"), a, b, want, gemm.epilogues.NO_ARGS)
        cupy_ops.matmul(a, b, algo="fp16x3")  # planned and packed before the threads
        cases.append((a, b, want))
    side = torch.cuda.Stream(cuda)
    side.wait_stream(torch.cuda.current_stream(cuda))
    outs, start, errors = [[], [], []], threading.Barrier(3), []

    def call(i, stream):
        try:
            start.wait()
            with torch.cuda.stream(stream):
                for _ in range(30):
                    outs[i].append(cupy_ops.matmul(cases[i][0], cases[i][1], algo="fp16x3"))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    default = torch.cuda.current_stream(cuda)
    threads = [threading.Thread(target=call, args=(i, s)) for i, s in enumerate((default, default, side))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize(cuda)
    assert not errors, errors
    for i, (_, _, want) in enumerate(cases):
        bad = [j for j, o in enumerate(outs[i]) if not torch.equal(o, want)]
        assert len(outs[i]) == 30 and not bad, f"case {i}: calls {bad} differ from run's"


@pytest.mark.parametrize("M, N", [(1024, 1024), (1024, 2048)], ids=["t from b's rows", "t from a's columns"])
@pytest.mark.parametrize("b_layout", ["row-major", "k-major"])
def test_scaling_along_k_changes_nothing(b_layout, M, N, cuda):
    """a D and D^-1 b for a power-of-two diagonal D give the same product bit for bit: one
    operand's K-slices' largest magnitudes are moved to the other's before the split, as rows
    of a and columns of b are scaled. Before, a's rows spanned D's range and lost the small
    values' products (D in 2^+-20: errors 4-8x the largest output where torch fp32's were 1e-6
    of it); the product's error against fp64 stays at most torch fp32's."""
    require_algo("fp16x3")
    torch.manual_seed(5)
    K = 1024
    a, b = torch.randn(M, K, device=cuda), torch.randn(K, N, device=cuda)
    d = torch.exp2(torch.randint(-20, 21, (K,), device=cuda).float())
    ad, bd = a * d, b / d[:, None]
    if b_layout == "k-major":
        b, bd = b.t().contiguous().t(), bd.t().contiguous().t()
    assert torch.equal(cupy_ops.matmul(ad, bd, algo="fp16x3"), cupy_ops.matmul(a, b, algo="fp16x3"))
    ref = ad.double() @ bd.double()
    err = lambda c: ((c.double() - ref).abs().max() / ref.abs().max()).item()  # noqa: E731
    ours, theirs = err(cupy_ops.matmul(ad, bd, algo="fp16x3")), err(torch_fp32(ad, bd))
    assert ours <= theirs, f"fp16x3 {ours:.3g} > torch fp32 {theirs:.3g}"


def test_rows_of_very_different_magnitudes_keep_their_own_precision(cuda):
    """Each row of a (column of b) has its own scale: rows 2^-60 .. 2^60 apart (one scale for
    the whole tensor would flush the small ones to zero) each keep the any-shape bound, 2^-18
    of their own sum of |a_ik b_kj|."""
    require_algo("fp16x3")
    torch.manual_seed(2)
    M, K, N = 512, 1024, 384
    a = torch.randn(M, K, device=cuda) * torch.exp2(torch.randint(-60, 61, (M, 1), device=cuda).float())
    b = torch.randn(K, N, device=cuda) * torch.exp2(torch.randint(-60, 61, (1, N), device=cuda).float())
    ref, absprod = a.double() @ b.double(), a.double().abs() @ b.double().abs()
    rel = ((cupy_ops.matmul(a, b, algo="fp16x3").double() - ref).abs() / absprod).max().item()
    assert rel <= 2.0**-18, f"fp16x3: {rel:.3g} of sum |a b| at worst"


@pytest.mark.parametrize("N", [131, 132], ids=["b rows off 16 bytes", "b rows aligned"])
def test_nan_and_inf_land_where_torch_fp32_puts_them(N, cuda):
    """Special values the split must not turn into NaN (0 * inf from a piece that is 0) or
    lose: +-inf, NaN, +-0, subnormals, fp16-exact values (remainder 0) and values lost to their
    row's scale meeting inf, rows of -0.0, a row of subnormals only (scaled up past 2^127);
    every finite output within the documented bound."""
    require_algo("fp16x3")
    torch.manual_seed(0)
    # no products past fp32's range: where a sum of such overflows depends on the summation order
    specials = torch.tensor(
        [float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 1.0, -1.0, 0.5, 1e-40, -1e-40, 2.0**-126, 1e15, 1e-30],
        device=cuda,
    )
    for trial in range(8):
        K = 257
        a, b = torch.randn(129, K, device=cuda), torch.randn(K, N, device=cuda)
        for t in (a, b):
            idx = torch.randint(0, t.numel(), (60,), device=cuda)
            t.view(-1)[idx] = specials[torch.randint(0, len(specials), (60,), device=cuda)]
        if trial % 2:
            a[3] = 1.0  # fp16-exact: remainder 0
            b[:, 5] = float("inf")
            a[7] = -0.0
            a[10, :] = 1e-40  # subnormals meeting inf
            a[11, :] = 1e-41 * torch.rand(K, device=cuda)
            a[12, :] = torch.randn(K, device=cuda)
            a[12, 0] = 1e15  # the rest of the row lost to its scale (2^-38 of 1e15) ...
            b[1:, 6] = 1e-10  # ... meeting inf (column 5) and small values
            b[:, 12] = float("-inf")
        ref, got = torch_fp32(a, b), cupy_ops.matmul(a, b, algo="fp16x3")
        assert torch.equal(ref.isnan(), got.isnan()), f"trial {trial}: NaN placement differs"
        assert torch.equal(ref.isinf(), got.isinf()) and torch.equal(ref[ref.isinf()], got[got.isinf()]), (
            f"trial {trial}: inf placement or sign differs"
        )
        fin = ref.isfinite()
        err = (got.double() - a.double() @ b.double()).abs()
        tol = contract_bound(a, b)
        bad = fin & ~(err <= tol)
        assert not bad.any(), f"trial {trial}: {int(bad.sum())} outputs past the bound, e.g. {got[bad][0].item()!r}"
    a = torch.full((64, 64), -0.0, device=cuda)
    assert torch.equal(
        cupy_ops.matmul(a, torch.randn(64, 40, device=cuda), algo="fp16x3"), torch.zeros(64, 40, device=cuda)
    )


def test_operand_layouts_and_nothing_stored_past_m(cuda):
    """Misaligned, transposed and strided views of a and b (each split from its own layout)
    against the bound; nothing stored past M. (Split-K and tall M: test_tf32x3.py, for both.)"""
    require_algo("fp16x3")
    torch.manual_seed(0)
    r = roundoff("fp16x3", torch.float32)
    big = torch.randn(301, 262, device=cuda)
    for aa, bb in (
        (big[1:, 1:], torch.randn(261, 77, device=cuda)),
        (big[:, :260].t(), big[:, 3:100]),
        (big[::2, ::2], big[:131, :50].t().contiguous().t()),
    ):
        Mx, Nx = aa.shape[0], bb.shape[1]
        p = gemm.plan_for(aa, bb, "EpiNone", "fp16x3")
        out = torch.full((Mx + 40, Nx), float("nan"), device=cuda)
        gemm.run(p, aa, bb, out[:Mx])
        assert out[Mx:].isnan().all(), f"stores past row {Mx} ({p})"
        assert_gemm_close(out[:Mx], aa, bb, operand_roundoff=r)


def test_models_take_fp16x3_for_large_float32_layers_on_hopper(cuda):
    """ModelNew (level2/63 and level1/1): float32 on Hopper takes fp16x3 or 3xTF32 by the cost
    model (planner.x3_estimates); both pass KernelBench's check."""
    dev = gemm.device_info(torch.cuda.current_device())
    assert gemm.fp32_accurate(2048, 2048, 4096, dev) == "fp16x3" and gemm.fp32_accurate(64, 256, 512, dev) == "tf32x3"
    torch.manual_seed(0)
    for M, K, N, algo in ((64, 512, 256, "tf32x3"), (2048, 4096, 2048, "fp16x3")):
        model = linear_relu_div.ModelNew(K, N, 2.0).to(cuda)
        x = torch.rand(M, K, device=cuda)
        with torch.no_grad():
            got = model(x)
            expect = (
                cupy_ops.linear_relu_div(x, model.linear.weight, model.linear.bias, 2.0, algo=algo)
                if HOPPER
                else linear_relu_div.ModelNewCublas.forward(model, x)
            )
            ref = linear_relu_div.Model.forward(model, x)
        assert torch.equal(got, expect)
        assert torch.allclose(got, ref, atol=1e-4, rtol=1e-4)
        a, b = torch.rand(M, K, device=cuda), torch.rand(K, N, device=cuda)
        expect = cupy_ops.matmul(a, b, algo=algo if HOPPER else "auto")
        assert torch.equal(matmul.ModelNew()(a, b), expect)
        assert torch.allclose(matmul.ModelNew()(a, b), matmul.Model()(a, b), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("algo", ["fp16x3", "accurate"])
def test_gradients_take_the_same_algo(algo, cuda, monkeypatch):
    """autograd through matmul and linear_relu_div with an fp32-accurate algo: each backward GEMM
    is planned with the forward's algo (a spy on the planner's ``plan``, its caches cleared,
    records every GEMM planned: the forward's and the two input gradients', in order) and
    takes its family: fp16x3 by name, or for "accurate" tf32x3 (these GEMMs are under 2^33 multiply-adds); each gradient
    within the fp32-accurate kernels' rounding bound of an fp64 reference."""
    require_algo("fp16x3")
    planned, real = [], gemm.planner.plan

    def spy(M, N, K, dtype, a, b, epilogue, dev, **kw):
        p = real(M, N, K, dtype, a, b, epilogue, dev, **kw)
        planned.append(((M, K), (K, N), epilogue, kw["algo"], p.family))
        return p

    gemm.planner.clear()  # every GEMM below planned anew, by the one planning function
    monkeypatch.setattr(gemm.planner, "plan", spy)
    torch.manual_seed(3)
    r = roundoff("fp16x3", torch.float32)
    a = torch.randn(130, 200, device=cuda, requires_grad=True)
    b = torch.randn(200, 70, device=cuda, requires_grad=True)
    g = torch.randn(130, 70, device=cuda)
    cupy_ops.matmul(a, b, algo=algo).backward(g)
    family = lambda M, N, K: "fp16x3" if algo == "fp16x3" else "tf32x3"  # noqa: E731  (all under 2^33 M N K)
    assert planned == [
        ((130, 200), (200, 70), "EpiNone", algo, family(130, 70, 200)),
        ((130, 70), (70, 200), "EpiNone", algo, family(130, 200, 70)),
        ((200, 130), (130, 70), "EpiNone", algo, family(200, 70, 130)),
    ], planned
    assert_gemm_close(a.grad, g, b.detach().t(), operand_roundoff=r)
    assert_gemm_close(b.grad, a.detach().t(), g, operand_roundoff=r)
    planned.clear()
    gemm.planner.clear()
    x = torch.randn(130, 200, device=cuda, requires_grad=True)
    w = torch.randn(70, 200, device=cuda, requires_grad=True)
    y = cupy_ops.linear_relu_div(x, w, None, 2.0, algo=algo)
    y.backward(g)
    assert planned == [
        ((130, 200), (200, 70), "EpiBiasReluScale", algo, family(130, 70, 200)),
        ((130, 70), (70, 200), "EpiNone", algo, family(130, 200, 70)),
        ((70, 130), (130, 200), "EpiNone", algo, family(70, 200, 130)),
    ], planned
    dz = g * (y.detach() > 0) / 2.0
    assert_gemm_close(x.grad, dz, w.detach(), operand_roundoff=r)
    assert_gemm_close(w.grad, dz.t(), x.detach(), operand_roundoff=r)


def test_model_new_refuses_a_0_dim_input_as_torch_words_it(cuda):
    """The models take torch's shapes (x of shape (*, in); matmul's 1-D and batched operands);
    a 0-dim input reaches the op, which refuses it as torch does (not an IndexError from the
    choice of kernel)."""
    model = linear_relu_div.ModelNew(16, 8, 2.0).to(cuda)
    with pytest.raises(RuntimeError, match="both arguments to linear need to be at least 1D"):
        model(torch.rand((), device=cuda))
    assert model(torch.rand(4, 2, 16, device=cuda)).shape == (4, 2, 8)
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        matmul.ModelNew()(torch.rand((), device=cuda), torch.rand(16, 4, device=cuda))
    assert matmul.ModelNew()(torch.rand(16, device=cuda), torch.rand(16, 4, device=cuda)).shape == (4,)


def test_fp16x3_plan():
    """fp16x3: asked for by name only; both operands in their tensor-core form (K-major fp32
    rows) for the split pass, 128 x 128 tiles over the fp16 pieces (64 values of K a tile),
    the whole shared-memory budget, split-K as 3xTF32's; K == 0 through the tc kernel; no
    swapped kernel, no other tile width. The models' choice (the cost model's; test_planner)."""
    assert "fp16x3" in gemm.ALGOS and gplan(4096, 4096, 4096).family == "simt"
    p = gplan(4096, 4096, 4096, algo="fp16x3")
    assert (p.family, p.kernel, p.tile, p.grid, p.slices, p.bk) == (
        "fp16x3",
        "gemm_fp16x3<128, EpiNone, true>",
        (128, 128),
        (132, 1, 1),
        1,
        64,
    )
    assert p.persistent and p.group == gemm.tables.WG_GROUP  # 1024 tiles walked by one CTA an SM
    assert gplan(4096, 4096, 4096, algo="fp16x3", persistent=False).grid == (1024, 1, 1)
    assert not gplan(1024, 1024, 1024, algo="fp16x3", split_k=False).persistent  # 64 tiles: one CTA each
    assert p.smem == gemm.geometry.X3_SMEM_BYTES and not p.swap
    assert (p.a.prep, p.b) == ("as is", gemm.Operand("n-major split", False, 4096))  # b split in place
    w = rowmajor(8192, 8192)
    p = gplan(1024, 8192, 8192, b=w.T, epi="EpiBiasReluScale", algo="fp16x3")
    assert p.kernel == "gemm_fp16x3<128, EpiBiasReluScale, false>" and p.b.prep == "as is" and p.grid == (132, 1, 1)
    for b in (rowmajor(4096, 4094), rowmajor(4096, 4096, aligned=False)):  # b's rows off 16 bytes: transposed
        p = gplan(4096, 4096, b.cols, b=b, algo="fp16x3")
        assert p.kernel == "gemm_fp16x3<128, EpiNone, false>" and p.b.prep == "transpose"
    p = gplan(1024, 1024, 1024, algo="fp16x3", epi="EpiBiasReluScale")  # 64 tiles: under half a wave
    assert (p.slices, p.kslice, p.kernel, p.grid) == (2, 512, "gemm_fp16x3_partial<128, true>", (64, 1, 2))
    assert p.reduce == "gemm_splitk_reduce<float, EpiBiasReluScale>"
    assert gplan(1024, 1024, 1024, algo="fp16x3", split_k=False).slices == 1
    with pytest.raises(ValueError, match=r"tile_n must be one of \(128,\) for algo='fp16x3', got 256"):
        gplan(1024, 1024, 1024, algo="fp16x3", tile_n=256)
    with pytest.raises(ValueError, match="swap=True: algo='fp16x3'"):
        gplan(1024, 1024, 1024, algo="fp16x3", swap=True)
    with pytest.raises(ValueError, match=r"algo='fp16x3' is the fp32 kernel on fp16 tensor cores .*got torch\.float16"):
        gplan(64, 64, 64, torch.float16, algo="fp16x3")
    with pytest.raises(ValueError, match=r"algo='fp16x3' needs a Hopper GPU .* has 8.0"):
        gplan(64, 64, 64, dev=A100, algo="fp16x3")
    p = gplan(64, 0, 64, algo="fp16x3")
    assert p.family == "tc" and "K == 0" in str(p)
    assert gemm.fp32_accurate(1024, 8192, 8192, H100) == "fp16x3"
    assert gemm.fp32_accurate(1024, 1024, 1024, H100) == "tf32x3"
    # a batch's entries: simt's batched kernel below X3_BATCH_MIN_WORK (the x3 families loop)
    assert gemm.fp32_accurate(1024, 1024, 128, H100, batched=True) == "simt"
    assert gemm.fp32_accurate(2048, 2048, 2048, H100, batched=True) == "fp16x3"
    assert "fp16x3_split" in gemm.variants()["gemm_sm90a.cu"]


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


class _Handle:
    """A loaded kernel's stand-in: its name, and the argument sets it was asked to pack."""

    def __init__(self, name):
        self.name, self.packs = name, []

    def packed(self, *args):
        self.packs.append(args)
        return (args, 0)


ACCUMULATORS = torch.zeros((1 << 16,), dtype=torch.uint8)  # _stub_driver's launch.accumulators


def _stub_driver(monkeypatch, capturing=False):
    """fp16x3's kernels, tensor maps, memset, launches and the stream's accumulators (None
    while ``capturing``) stubbed (CPU):
    ``(handles, events, maps)``, the handles by name (each with the argument sets it packed),
    every memset and launch in order, every tensor map's address."""
    from cupy_ops import launch, occupancy
    from cupy_ops.ops.gemm import fp16x3, runtime, tma

    handles, events, maps = {}, [], []

    def handle(kernels, expr, device):
        return handles.setdefault(expr, _Handle(expr))

    def tensor_map_at(addr, *rest):
        maps.append(addr)
        return ("map", addr, *rest)

    monkeypatch.setattr(fp16x3, "handle", handle)
    monkeypatch.setattr(runtime, "handle", handle)
    monkeypatch.setattr(tma, "tensor_map_at", tensor_map_at)
    monkeypatch.setattr(fp16x3, "device_info", lambda d: H100)
    monkeypatch.setattr(occupancy, "blocks_per_sm", lambda h, block, smem=0: 3)
    monkeypatch.setattr(launch, "memset", lambda dev, ptr, n: events.append(("memset", ptr, n)))
    # the stream's accumulators: one buffer (None: capturing a graph, as ``accumulators`` answers)
    monkeypatch.setattr(launch, "accumulators", lambda dev, n: None if capturing else ACCUMULATORS.data_ptr())
    monkeypatch.setattr(launch, "launch", lambda h, g, b, args, smem=0, cl=1: events.append((h.name, g, b, args, smem)))
    monkeypatch.setattr(
        launch, "launch_packed", lambda h, g, b, packed, smem=0, cl=1: events.append((h.name, g, b, packed[0], smem))
    )
    return handles, events, maps


def _workspace(monkeypatch, total: int) -> torch.Tensor:
    """One workspace for every call (the caching allocator hands a freed block back alike):
    ``torch.empty`` of ``total`` bytes answers it."""
    ws = torch.empty((total,), dtype=torch.uint8)
    real_empty = torch.empty

    def empty(*s, **kw):
        return ws if s in ((total,), ((total,),)) and kw.get("dtype") is torch.uint8 else real_empty(*s, **kw)

    monkeypatch.setattr(torch, "empty", empty)
    return ws


@pytest.mark.parametrize("M, N, K, b_layout, way", ROUTES + [(256, 256, 8192, "k-major", "b")])  # (split-K)
@pytest.mark.parametrize("capturing", [False, True], ids=["eager", "capturing"])
def test_the_launcher_launches_what_run_does_packed_once_per_address_set(
    M, N, K, b_layout, way, capturing, monkeypatch
):
    """fp16x3.launcher: a call launches the steps ``run`` launches (kernels, grids, blocks,
    shared memory, arguments: workspace addresses taken from its base) and zeroes what they
    accumulate in. Eagerly t's kernel accumulates in the stream's ``launch.accumulators`` (zero
    at rest: no memset before it), the workspace's keys zeroed after it where a later kernel
    accumulates them; while capturing a graph it is ``run``: the workspace's keys and
    accumulators zeroed first. The arguments, four tensor maps among them, are packed once per
    address set (A, B, C, the workspace, the accumulators, the epilogue's) and again when one
    changes. CPU, the driver stubbed: the plan's real steps."""
    from cupy_ops.ops.gemm import fp16x3

    handles, events, maps = _stub_driver(monkeypatch, capturing)
    a = torch.randn(M, K)
    b = torch.randn(K, N) if b_layout == "row-major" else torch.randn(N, K).t()
    c = torch.empty(M, N)
    epi = gemm.epilogues.NO_ARGS
    p = gemm.plan(M, N, K, torch.float32, gemm.Matrix.of(a), gemm.Matrix.of(b), "EpiNone", H100, algo="fp16x3")
    assert p.family == "fp16x3" and p.a.prep == "as is" and p.b.prep in ("n-major split", "as is")
    assert (p.slices > 1) == (K == 8192) and fp16x3.route(p, M, N) == way
    offsets, total = fp16x3.layout(p, M, N, K)
    base = _workspace(monkeypatch, total).data_ptr()
    done = offsets[fp16x3._DONE]  # the workspace's accumulators: its count, then its keys

    def relative(calls, acc):  # addresses as (part, offset): the workspace's, the accumulators'
        def rel(v):
            if isinstance(v, tuple):
                return tuple(rel(x) for x in v)
            if isinstance(v, int) and acc <= v < acc + total - done:
                return ("acc", v - acc)
            if isinstance(v, int) and base <= v < base + total:
                return ("ws", v - base)
            return v

        return [rel(e) for e in calls]

    fp16x3.run(p, a, b, c, epi)
    want = relative(events, base + done)
    keys = done - offsets[fp16x3._KEYS]  # B's columns' keys (0: a K-major b)
    assert (keys > 0) == (b_layout == "row-major")
    zeroed_from = ("ws", offsets[fp16x3._KEYS]) if keys else ("acc", 0)  # B's keys, then the accumulators
    assert want[0] == ("memset", zeroed_from, total - offsets[fp16x3._KEYS])
    first = want[1]
    names = {"a": "fp16x3_colmax_n", "b": "fp16x3_colmax_n", "rows": "fp16x3_rowmax", "rowcol": "fp16x3_rowcolmax<1>"}
    assert first[0] == names[way]
    if capturing:
        expect = want
    else:  # B's keys zeroed where fp16x3_colmax_n accumulates them after t's kernel
        zero_keys = way in ("a", "rows") and keys > 0
        expect = [first] + ([("memset", ("ws", offsets[fp16x3._KEYS]), keys)] if zero_keys else []) + want[2:]
    events.clear()
    go = fp16x3.launcher(p, -1)

    def packed():  # argument sets packed and tensor maps encoded so far
        return sum(len(h.packs) for h in handles.values()), len(maps)

    acc = base + done if capturing else ACCUMULATORS.data_ptr()
    before = packed()
    go(a, b, c, epi)
    assert relative(events, acc) == expect
    after = packed()
    per_set = (after[0] - before[0], after[1] - before[1])
    assert per_set == (len(want) - 1, 4), per_set  # each step once; A's and B's hi and lo maps
    for _ in range(2):  # the same addresses: nothing packed or encoded again
        events.clear()
        go(a, b, c, epi)
        assert relative(events, acc) == expect and packed() == after
    for new in ("c", "epi"):  # a new output or epilogue scale: packed again (t's kernel not), the new values launched
        c2, epi2 = (torch.empty(M, N), epi) if new == "c" else (c, gemm.epilogues.builtin_args(0, 0.5))
        events.clear()
        go(a, b, c2, epi2)
        assert packed() == (after[0] + per_set[0] - 1, after[1] + per_set[1]), new
        after = packed()
        last = events[-1][3]  # the GEMM's arguments, or split-K's reduction's
        assert c2.data_ptr() in last and epi2[2] in last and (new == "c" or epi[2] not in last), new


def test_the_output_is_allocated_after_the_first_kernel(monkeypatch):
    """matmul's and a Linear layer's signature paths allocate fp16x3's workspace, issue its
    first kernel (t's, no memset before it) and only then allocate the output, so the GPU starts
    while the host allocates (docs/design.md#host-cost). CPU, the driver stubbed."""
    from cupy_ops.ops.gemm import fp16x3, planner

    events = _stub_driver(monkeypatch)[1]
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *s, **kw: events.append(("empty", s)) or real_empty(*s, **kw))
    M, N, K = 512, 256, 384
    a, b = torch.randn(M, K), torch.randn(K, N)
    p = gemm.plan(M, N, K, torch.float32, gemm.Matrix.of(a), gemm.Matrix.of(b), "EpiNone", H100, algo="fp16x3")
    go = fp16x3.launcher(p, -1)
    monkeypatch.setattr(planner, "_products", _Always(((M, N), a.device, go, go.start)))
    out = planner.product(a, b, "fp16x3", None)
    names = [e[0] for e in events]
    assert names[:3] == ["empty", "fp16x3_rowcolmax<1>", "empty"] and events[2][1] == (M, N), names
    assert out.shape == (M, N) and names[-1] == p.kernel and "memset" not in names
    events.clear()
    w = torch.randn(N, K)  # a Linear's weight: x @ w.T
    pw = gemm.plan(M, N, K, torch.float32, gemm.Matrix.of(a), gemm.Matrix.of(w.t()), "EpiNone", H100, algo="fp16x3")
    go = fp16x3.launcher(pw, -1)
    out = planner.run_layer(((M, N), a.device, M, False, go, None, go.start), a, w, gemm.epilogues.NO_ARGS)
    names = [e[0] for e in events]
    assert names[:3] == ["empty", "fp16x3_colmax_n", "empty"] and events[2][1] == (M, N), names
    assert out.shape == (M, N) and names[-1] == pw.kernel and "memset" not in names


class _Always(dict):
    """A signature cache that holds ``entry`` for every key."""

    def __init__(self, entry):
        super().__init__()
        self.entry = entry

    def get(self, key, default=None):
        return self.entry


def test_a_copied_operand_is_split_and_multiplied_over_k_not_its_padded_rows(monkeypatch):
    """A's rows copied into 16-byte rows (K = 45: 48 values a row) are still K long: the GEMM,
    its tensor maps and the pieces' rows take K (the padding is zeroed, never summed as K).
    CPU, the driver stubbed."""
    from cupy_ops.ops.gemm import fp16x3

    events = _stub_driver(monkeypatch)[1]
    M, N, K = 64, 64, 45
    a, b, c = torch.randn(M, K), torch.randn(K, N), torch.empty(M, N)
    p = gemm.plan(M, N, K, torch.float32, gemm.Matrix.of(a), gemm.Matrix.of(b), "EpiNone", H100, algo="fp16x3")
    assert p.a.prep == "k-major copy" and p.a.ld == 48 and p.b.prep == "n-major split" and p.slices == 1
    fp16x3.launcher(p, -1)(a, b, c, gemm.epilogues.NO_ARGS)
    gemm_args = events[-1][3]
    assert events[-1][0] == p.kernel and gemm_args[4:9] == (c.data_ptr(), N, M, N, K), gemm_args[4:9]
    assert [m[2:4] for m in gemm_args[:4]] == [(torch.float16, K)] * 2 + [(torch.float16, N)] * 2


def test_threads_making_a_launchers_first_call_together_leave_it_working(monkeypatch):
    """Two threads in a launcher's first call at once (its layout worked out by both) leave it
    launching what ``run`` launches, then and after. CPU, the driver stubbed, the layout slowed
    so that both threads are inside it."""
    import threading
    import time

    from cupy_ops.ops.gemm import fp16x3

    events = _stub_driver(monkeypatch)[1]
    real_layout = fp16x3.layout
    monkeypatch.setattr(fp16x3, "layout", lambda *a: time.sleep(0.05) or real_layout(*a))
    M, N, K = 256, 512, 384
    a, b, c = torch.randn(M, K), torch.randn(K, N), torch.empty(M, N)
    p = gemm.plan(M, N, K, torch.float32, gemm.Matrix.of(a), gemm.Matrix.of(b), "EpiNone", H100, algo="fp16x3")
    go, start, errors = fp16x3.launcher(p, -1), threading.Barrier(2), []

    def call():
        start.wait()
        try:
            go(a, b, c, gemm.epilogues.NO_ARGS)
        except Exception as e:  # noqa: BLE001 (any failure in the thread, reported below)
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    events.clear()
    go(a, b, c, gemm.epilogues.NO_ARGS)
    way = fp16x3.route(p, M, N)
    rest = fp16x3._rest(p, way, K, a, b, c, 0, [0] * 11, gemm.epilogues.NO_ARGS)
    assert [e[0] for e in events] == [fp16x3._first(p, way, a, b, 0, 0, 0)[0].name, "memset"] + [
        s[0].name for s in rest
    ]
