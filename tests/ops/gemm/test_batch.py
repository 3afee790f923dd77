"""torch.matmul's and F.linear's shapes: 1-D operands, batch dimensions and their broadcast,
empty batches, any strides; the output rule (the fake) gives torch's shape, bad shapes raise
torch's exception type; the batch folds into M on a view where the strides allow, else one
2-D GEMM per batch entry. CPU tests drive the batch layer (ops/gemm/batch.py) with torch's own
2-D product in place of a kernel; GPU tests run the ops against torch, forward and backward,
with property tests over random batch shapes, broadcasting and views."""

import pytest
import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops import checks
from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import batch

from conftest import HOPPER, assert_bitwise_equal, assert_of_torchs_error_order
from gemm_checks import assert_gemm_close, roundoff
from gemm_plans import A100, H100

# (full_precision_reductions: torch sums 16-bit GEMMs in fp32 as ours do)
pytestmark = pytest.mark.usefixtures("full_precision_reductions")

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (the test extra has it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FAST = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# every shape pair of torch's own matmul OpInfo samples, and more broadcasting
SHAPE_PAIRS = [
    ((20,), (20,)),
    ((5, 10), (10,)),
    ((10,), (10, 5)),
    ((5, 10), (10, 5)),
    ((5, 0), (0, 10)),
    ((5, 5, 10), (10,)),
    ((5, 5, 10), (10, 5)),
    ((5, 5, 0), (0, 5)),
    ((10,), (5, 10, 5)),
    ((5, 10), (5, 10, 5)),
    ((0, 0), (5, 0, 0)),
    ((5, 5, 10, 10), (5, 5, 10, 5)),
    ((5, 5, 10, 10), (10,)),
    ((10,), (5, 5, 10, 5)),
    ((5, 5, 5), (1, 5, 5)),
    ((3, 1, 4, 5), (2, 5, 6)),
    ((1, 4, 5), (3, 1, 5, 6)),
    ((0, 4, 5), (5, 6)),
    ((2, 0, 4, 5), (1, 5, 6)),
    ((4, 0), (0,)),
    ((0,), (0,)),
    ((7, 1, 3), (3, 1)),
]
BAD_PAIRS = [
    ((), (3,)),
    ((3,), ()),
    ((), ()),
    ((3,), (4,)),
    ((2, 3), (4,)),
    ((3,), (4, 5)),
    ((2, 3), (4, 5)),
    ((2, 2, 3), (2, 4, 5)),
    ((2, 2, 3), (3, 3, 5)),
    ((2, 2, 3), (4, 5)),
    ((4, 1, 2, 3), (2, 3, 3, 5)),
]


def _torch_error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return type(exc)
    return None


def run_with(a, b, out, plan_for, run_plan):
    """``batch.run(a, b, out)`` with the planner's ``plan_for`` and ``run`` stood in for (a CPU
    "kernel", a recorder), and its ``launcher_for`` (the 2-D path) made of the two."""

    def launcher_for(x, y, epilogue, algo):
        p = plan_for(x, y, epilogue, algo)
        return lambda x, y, z, epi: run_plan(p, x, y, z, epi=epi)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "plan_for", plan_for)
        mp.setattr(batch, "run_plan", run_plan)
        mp.setattr(batch, "launcher_for", launcher_for)
        batch.run(a, b, out)


def plan_with(a, b, plan_for):
    """``batch.batch_plan(a, b)`` with ``plan_for`` stood in for."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch, "plan_for", plan_for)
        return batch.batch_plan(a, b)


def cpu_gemm(p, x, y, z, epi=None):
    """A 2-D "kernel" for the batch layer on the CPU: z = x @ y in float64; each call must be a
    2-D product into a 2-D view of the output."""
    assert x.dim() == 2 and y.dim() == 2 and z.shape == (x.shape[0], y.shape[1]), (x.shape, y.shape, z.shape)
    assert z.is_contiguous()
    z.copy_(x.double() @ y.double())


def batched_cpu(a, b):
    out = torch.empty(checks.matmul_shape(a, b), dtype=torch.float64)
    run_with(a, b, out, lambda *args: None, cpu_gemm)
    return out


@pytest.mark.parametrize("sa, sb", SHAPE_PAIRS)
def test_output_rule_gives_torch_matmul_shape(sa, sb):
    a, b = torch.empty(sa, device="meta"), torch.empty(sb, device="meta")
    assert checks.matmul_shape(a, b) == tuple(torch.matmul(a, b).shape)


@pytest.mark.parametrize("sa, sb", BAD_PAIRS)
def test_bad_shapes_raise_torch_exception_type(sa, sb):
    a, b = torch.randn(sa), torch.randn(sb)
    expected = _torch_error(lambda: torch.matmul(a, b))
    assert expected is RuntimeError
    with pytest.raises(expected):
        cupy_ops.matmul(a, b)  # the shape is checked before the device
    with pytest.raises(ValueError):  # and it is a ValueError, as every cupy_ops shape error
        cupy_ops.matmul(a, b)


def test_dtype_mismatch_raises_torch_exception_type():
    for sa, sb in (((2, 3), (3, 4)), ((3,), (3,)), ((2, 2, 3), (3, 4))):
        a, b = torch.randn(sa), torch.randn(sb, dtype=torch.float64)
        expected = _torch_error(lambda: torch.matmul(a, b))
        with pytest.raises(expected):
            cupy_ops.matmul(a, b)
        with pytest.raises(TypeError, match="b must have the same dtype as a"):
            cupy_ops.matmul(a, b)
    x, w = torch.randn(2, 5), torch.randn(4, 5, dtype=torch.float64)
    with pytest.raises(_torch_error(lambda: F.linear(x, w))):
        cupy_ops.linear_relu_div(x, w, None, 2.0)


@pytest.mark.parametrize("sx", [(3,), (0, 3), (8, 3), (2, 3, 3), (2, 1, 2, 1, 3), (0, 2, 3), (4, 0, 3)])
def test_linear_output_rule_gives_f_linear_shape(sx):
    x, w, bias = torch.empty(sx, device="meta"), torch.empty(5, 3, device="meta"), torch.empty(5, device="meta")
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):  # the shape rule passed; the device did not
        checks.linear_args(x, w, bias, "auto", ("auto",))
    assert tuple(x.shape[:-1]) + (5,) == tuple(F.linear(x, w, bias).shape)


@pytest.mark.parametrize(
    "sx, sw, sb",
    [
        ((), (4, 5), None),
        ((2, 3), (4, 5), None),
        ((7, 2, 3), (4, 5), None),
        ((3,), (4, 5), None),
        ((2, 5), (4, 5), (3,)),
        ((2, 5), (1, 4, 5), None),
    ],
)
def test_linear_bad_shapes_raise_torch_exception_type(sx, sw, sb):
    x, w = torch.randn(sx), torch.randn(sw)
    bias = None if sb is None else torch.randn(sb)
    expected = _torch_error(lambda: F.linear(x, w, bias))
    assert expected is RuntimeError
    with pytest.raises(expected):
        cupy_ops.linear_relu_div(x, w, bias, 2.0)


@pytest.mark.parametrize("sa, sb", SHAPE_PAIRS)
def test_batch_layer_gives_torch_matmul(sa, sb):
    a, b = torch.randn(sa, dtype=torch.float64), torch.randn(sb, dtype=torch.float64)
    torch.testing.assert_close(batched_cpu(a, b), torch.matmul(a, b))


def test_a_foldable_batch_is_one_gemm_on_a_view():
    a = torch.randn(6, 4, 5)[:, 1:3]  # (6, 2, 5): rows 2 apart: the batch does not fold
    b = torch.randn(5, 3)
    seen = []

    def record(p, x, y, z, epi=None):
        seen.append((x, y, z))
        cpu_gemm(p, x, y, z, epi=epi)

    for t, mode in (
        (torch.randn(6, 4, 5), "folded"),
        (torch.randn(4, 6, 5).transpose(0, 1)[:, :4], "folded, a copied"),
        (a, "folded, a copied"),
    ):
        seen.clear()
        out = torch.empty(checks.matmul_shape(t, b), dtype=torch.float64)
        run_with(t, b, out, lambda *args: None, record)
        assert plan_with(t, b, lambda *args: "plan").mode == mode
        assert len(seen) == 1 and seen[0][0].shape == (t.shape[0] * t.shape[1], 5)
        assert (seen[0][0].data_ptr() == t.data_ptr()) == (mode == "folded")
        torch.testing.assert_close(out, torch.matmul(t.double(), b.double()))
    # a sliced last-but-one dimension that still folds: (6, 4, 5)[:, :, :3] rows are 5 apart, batches 20
    t = torch.randn(6, 4, 5)[..., :3]
    assert batch.folds(t) and plan_with(t, torch.randn(3, 2), lambda *args: "plan").mode == "folded"


def test_a_broadcast_batch_is_a_stride_0_view_never_a_copy():
    a, b = torch.randn(1, 3, 4, 5), torch.randn(2, 1, 5, 6)
    seen = []

    def record(p, x, y, z, epi=None):
        seen.append((x.data_ptr(), y.data_ptr()))
        cpu_gemm(p, x, y, z, epi=epi)

    out = torch.empty(checks.matmul_shape(a, b), dtype=torch.float64)
    run_with(a, b, out, lambda *args: None, record)
    p = plan_with(a, b, lambda *args: "plan")
    assert p.mode == "loop" and p.launches == 6 and p.batch_shape == (2, 3)
    # every operand a view into a's and b's own storage
    a_ptrs = {a[0, i].data_ptr() for i in range(3)}
    b_ptrs = {b[j, 0].data_ptr() for j in range(2)}
    assert {x for x, _ in seen} == a_ptrs and {y for _, y in seen} == b_ptrs
    torch.testing.assert_close(out, torch.matmul(a.double(), b.double()))


class _BatchedPlan:
    batch = 1  # what a family's batched plan says: the batch goes in the grid


def test_a_family_with_a_batched_kernel_gets_the_batch_as_strided_views():
    """Where the family plans a batched kernel, each launch is one (B, M, K) x (B, K, N) view
    pair with one batch stride each (0: broadcast): the batch dimensions that collapse for both
    operands make one launch, the outer ones a launch each; no operand is copied."""
    seen = []

    def run3d(p, x, y, z, epi=None):
        assert x.dim() == 3 and y.dim() == 3 and z.shape == (x.shape[0], x.shape[1], y.shape[2]) and z.is_contiguous()
        seen.append((x.shape[0], x.stride(0), y.stride(0)))
        z.copy_(torch.bmm(x.double(), y.double()))

    for sa, sb, launches in (
        ((4, 3, 5), (4, 5, 2), 1),
        ((3, 5), (4, 5, 2), 1),
        ((2, 3, 4, 5), (5, 6), None),
        ((1, 3, 4, 5), (2, 1, 5, 6), 2),
        ((2, 3, 4, 5), (2, 3, 5, 6), 1),
        ((5,), (2, 3, 5, 6), 1),
        ((2, 1, 4, 5), (2, 3, 5, 6), 2),
    ):
        a, b = torch.randn(sa, dtype=torch.float64), torch.randn(sb, dtype=torch.float64)
        seen.clear()
        out = torch.empty(checks.matmul_shape(a, b), dtype=torch.float64)
        run_with(
            a,
            b,
            out,
            lambda *args: _BatchedPlan(),
            lambda p, x, y, z, epi=None: (run3d if x.dim() == 3 else cpu_gemm)(p, x, y, z, epi=epi),
        )
        torch.testing.assert_close(out, torch.matmul(a, b))
        p = plan_with(a, b, lambda *args: _BatchedPlan())
        if launches is None:
            assert p.mode == "folded" and not seen
        else:
            assert p.mode == "batched" and p.launches == launches == len(seen), (sa, sb, seen)
    # a (1, 3) batch against (2, 1): the outer dimension is a launch each, the inner one a stride-0 broadcast of a
    a, b = torch.randn(1, 3, 4, 5, dtype=torch.float64), torch.randn(2, 1, 5, 6, dtype=torch.float64)
    seen.clear()
    run_with(a, b, torch.empty(2, 3, 4, 6, dtype=torch.float64), lambda *args: _BatchedPlan(), run3d)
    assert seen == [(3, 20, 0), (3, 20, 0)]


def test_an_empty_output_plans_no_launch():
    for sa, sb in (((0, 4, 5), (5, 6)), ((3, 0, 5), (5, 6)), ((2, 3, 4), (2, 4, 0)), ((0, 3, 4), (0, 4, 2))):
        a, b = torch.randn(sa), torch.randn(sb)
        p = plan_with(a, b, lambda *args: "plan")
        assert p.launches == 0 and p.gemm is None and "no launch" in str(p)
        out = torch.empty(checks.matmul_shape(a, b), dtype=torch.float64)
        run_with(a, b, out, lambda *args: None, lambda *args: pytest.fail("a launch for an empty output"))


def _plan(B, M, K, N, dtype, dev, sa=None, sb=None, b_kmajor=False, epilogue="EpiNone", tf32=False, **overrides):
    es = torch.empty((), dtype=dtype).element_size()
    a = gemm.Matrix(M, K, K, 1, es, True)
    b = gemm.Matrix(K, N, 1, K, es, True) if b_kmajor else gemm.Matrix(K, N, N, 1, es, True)
    return gemm.plan(
        M,
        N,
        K,
        dtype,
        a,
        b,
        epilogue,
        dev,
        tf32=tf32,
        batch=(B, M * K if sa is None else sa, K * N if sb is None else sb),
        **overrides,
    )


def test_plans_of_a_batch_by_family():
    """Which families plan a batched kernel (CPU: the plans are pure), and where they do not."""
    p = _plan(32, 1024, 128, 1024, torch.bfloat16, H100)
    assert p.kernel == "gemm_wgmma_batched<bf16, true, 256, EpiNone>" and p.batch == 32
    assert p.grid == (132, 1, 1) and p.persistent and not p.tma_store  # 1024 tiles: persistent
    p = _plan(32, 1024, 128, 1024, torch.bfloat16, H100, persistent=False)
    assert p.grid == (8 * 4 * 32, 1, 1) and not p.persistent
    assert not _plan(2, 128, 64, 128, torch.bfloat16, H100).persistent  # less than a wave
    assert (
        _plan(32, 1024, 128, 1024, torch.float16, H100, b_kmajor=True).kernel
        == "gemm_wgmma_batched<f16, false, 256, EpiNone>"
    )
    assert _plan(2, 128, 64, 128, torch.bfloat16, H100).kernel == "gemm_wgmma_batched<bf16, true, 128, EpiNone>"
    assert _plan(4, 128, 64, 128, torch.bfloat16, H100, sa=0).batch == 4  # a broadcast
    assert _plan(4, 128, 64, 128, torch.bfloat16, H100, sa=128 * 64 + 4).batch == 0  # entries off 16 bytes
    assert _plan(4, 128, 64, 128, torch.bfloat16, H100, sb=64).batch == 0  # entries interleaved
    assert _plan(4, 128, 64, 128, torch.bfloat16, H100, epilogue="EpiBiasReluScale").batch == 0
    assert _plan(4, 128, 64, 128, torch.bfloat16, A100).batch == 0  # tc: b row-major is transposed
    p = _plan(4, 128, 64, 128, torch.bfloat16, A100, b_kmajor=True)  # ... K-major read in place
    assert p.kernel == "gemm_tc_batched<bf16, EpiNone>" and p.grid == (1, 1, 4)
    p = _plan(4, 128, 64, 128, torch.float32, H100, b_kmajor=True, tf32=True)  # TF32, K-major b
    assert p.kernel == "gemm_wgmma_batched<float, false, 128, EpiNone>"
    for ov in ({}, {"swap": True}):  # TF32, row-major b: swapped, C^T = B^T A^T entry by entry
        p = _plan(4, 128, 64, 96, torch.float32, H100, tf32=True, **ov)
        assert p.kernel == "gemm_wgmma_batched_swap<128, EpiNone>" and p.swap and p.tma_store and p.batch == 4
        assert p.b.prep == "n-major" and p.b.ld == 96 and p.grid == (4, 1, 1)  # C^T's tiles: 1 x 1 an entry
    assert _plan(4, 128, 64, 128, torch.float32, H100, tf32=True, sb=64 * 128 + 1).batch == 0  # entries off 16 bytes
    assert _plan(4, 128, 64, 128, torch.float32, H100, tf32=True, sb=128).batch == 0  # entries interleaved
    p = _plan(4, 128, 64, 128, torch.float32, H100, tf32=True, swap=False)  # not swapped: b copied K-major
    assert p.kernel == "gemm_wgmma_batched<float, false, 128, EpiNone>" and p.b.prep == "k-major copy"
    assert p.b.ld == 64 and not p.swap
    p = _plan(8, 2048, 2048, 2048, torch.float32, H100, tf32=True)  # swapped at any size
    assert p.kernel == "gemm_wgmma_batched_swap<256, EpiNone>" and p.persistent and p.batch == 8
    assert _plan(8, 2048, 2048, 2048, torch.float32, H100, tf32=True, swap=False).batch == 0  # not copied: a loop
    # "accurate": small entries on simt's batched kernel (the x3 families loop), large ones fp16x3
    assert _plan(32, 1024, 128, 1024, torch.float32, H100, algo="accurate").kernel.startswith("gemm_simt_batched<")
    p = _plan(8, 2048, 2048, 2048, torch.float32, H100, algo="accurate")
    assert p.family == "fp16x3" and p.batch == 0
    assert _plan(32, 1024, 128, 1024, torch.float32, H100, algo="tf32x3").family == "tf32x3"  # asked for by name
    p = _plan(70000, 2, 3, 2, torch.float32, H100)  # simt: chunks of 65535
    assert p.kernel.startswith("gemm_simt_batched<") and p.grid[2] == 65535 and p.batch == 70000 and p.slices == 1
    p = _plan(3, 256, 4096, 256, torch.float32, H100)  # no split-K over a batch
    assert p.batch == 3 and p.slices == 1 and p.reduce is None
    assert _plan(3, 20, 30, 40, torch.float64, H100).kernel == "gemm_naive_batched<double, EpiNone>"
    # the batched wgmma kernel's overrides: width and the persistent grid
    p = _plan(32, 1024, 128, 1024, torch.bfloat16, H100, tile_n=128, persistent=True)
    assert p.kernel == "gemm_wgmma_batched<bf16, true, 128, EpiNone>" and p.persistent and p.grid == (132, 1, 1)
    with pytest.raises(ValueError, match="batched kernels take tile_n 128 or 256"):
        _plan(32, 1024, 128, 1024, torch.bfloat16, H100, cluster=2, tile_n=256)


# --- views and broadcasting, generated ---------------------------------------------------------


@st.composite
def operand(draw, batch_shape, rows, cols, dtype=torch.float64, device="cpu"):
    """A (batch_shape..., rows, cols) view: maybe built transposed, sliced with a step or an
    offset, or with size-1 batch dimensions expanded (stride 0)."""
    shape = tuple(batch_shape) + (rows, cols)
    kind = draw(st.sampled_from(["contiguous", "transposed", "sliced", "expanded", "batch-transposed"]))
    if kind == "transposed":
        t = torch.randn(shape[:-2] + (cols, rows), dtype=dtype, device=device).transpose(-1, -2)
    elif kind == "sliced":
        t = torch.randn(shape[:-1] + (2 * cols + 1,), dtype=dtype, device=device)[..., 1::2]
    elif kind == "expanded" and len(batch_shape):
        base = torch.randn((1,) * len(batch_shape) + (rows, cols), dtype=dtype, device=device)
        t = base.expand(shape)
    elif kind == "batch-transposed" and len(batch_shape) >= 2:
        t = torch.randn(
            (batch_shape[1], batch_shape[0]) + tuple(batch_shape[2:]) + (rows, cols), dtype=dtype, device=device
        ).transpose(0, 1)
    else:
        t = torch.randn(shape, dtype=dtype, device=device)
    assert t.shape == shape
    return t


@st.composite
def matmul_operands(draw, dtype=torch.float64, device="cpu", max_size=9):
    """Two operands of torch.matmul: 1-D or with 0-3 batch dimensions that broadcast (a size of
    1 on either side, or missing), sizes 0 to max_size."""
    size = st.integers(0, max_size)
    M, K, N = draw(size), draw(size), draw(size)
    batch = draw(st.lists(st.integers(0, 3), max_size=3))
    a_batch = [draw(st.sampled_from([s, 1])) for s in batch]
    b_batch = [draw(st.sampled_from([s, 1])) for s in batch]
    a_batch = a_batch[draw(st.integers(0, len(a_batch))) :]
    b_batch = b_batch[draw(st.integers(0, len(b_batch))) :]
    a_vec, b_vec = draw(st.booleans()) and not a_batch, draw(st.booleans()) and not b_batch
    a = operand(a_batch, 1, K, dtype, device) if a_vec else operand(a_batch, M, K, dtype, device)
    b = operand(b_batch, K, 1, dtype, device) if b_vec else operand(b_batch, K, N, dtype, device)
    a, b = draw(a), draw(b)
    return (a[0] if a_vec else a), (b[..., 0] if b_vec else b)


@FAST
@given(matmul_operands())
def test_batch_layer_on_views_and_broadcasts(ab):
    a, b = ab
    assert checks.matmul_shape(a, b) == tuple(torch.matmul(a, b).shape)
    torch.testing.assert_close(batched_cpu(a, b), torch.matmul(a, b))


# --- on the GPU ------------------------------------------------------------------------------


# torch's tolerances for the dtype (torch.testing.assert_close's defaults), as torch's own
# OpInfo tests compare a GEMM; the sizes here are small (K <= 40), as op_db's
def _close(got, expected):
    torch.testing.assert_close(got, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("sa, sb", SHAPE_PAIRS)
def test_matmul_shapes_against_torch(cuda, dtype, sa, sb):
    a = torch.randn(sa, device=cuda, dtype=dtype, requires_grad=True)
    b = torch.randn(sb, device=cuda, dtype=dtype, requires_grad=True)
    got = cupy_ops.matmul(a, b)
    expected = torch.matmul(a, b)
    a64, b64 = (t.detach().double().requires_grad_() for t in (a, b))
    exact = torch.matmul(a64, b64)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert_of_torchs_error_order(got, expected, exact, "forward")
    g = torch.randn_like(expected)
    for i, (ours, theirs, e) in enumerate(
        zip(
            torch.autograd.grad(got, (a, b), g),
            torch.autograd.grad(expected, (a, b), g),
            torch.autograd.grad(exact, (a64, b64), g.double()),
        )
    ):
        assert_of_torchs_error_order(ours, theirs, e, f"gradient {i}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("sx", [(3,), (0, 3), (8, 3), (2, 3, 3), (2, 1, 2, 1, 3), (0, 2, 3), (4, 0, 3)])
def test_linear_relu_div_on_leading_dimensions(cuda, dtype, sx):
    x = torch.randn(sx, device=cuda, dtype=dtype, requires_grad=True)
    w = torch.randn(5, 3, device=cuda, dtype=dtype, requires_grad=True)
    bias = torch.randn(5, device=cuda, dtype=dtype, requires_grad=True)
    got = cupy_ops.linear_relu_div(x, w, bias, 2.0)
    expected = torch.relu(F.linear(x, w, bias)) / 2.0
    assert got.shape == expected.shape
    _close(got, expected)
    g = torch.randn_like(expected)
    _close(torch.autograd.grad(got, (x, w, bias), g), torch.autograd.grad(expected, (x, w, bias), g))


@pytest.mark.gpu
def test_linear_relu_div_on_strided_leading_dimensions(cuda):
    """x (batch, seq, in) as views: its leading dimensions fold into M on a view where they
    collapse (a slice of whole batches), else x is copied first (a slice along seq, a transposed
    (seq, batch) view), as torch's reshape copies it; all give F.linear's result."""
    w = torch.randn(16, 32, device=cuda)
    bias = torch.randn(16, device=cuda)
    base = torch.randn(4, 6, 32, device=cuda)
    for x in (base, base[1:3], base[:, 2:], base.transpose(0, 1), base[..., :32]):
        _close(cupy_ops.linear_relu_div(x, w, bias, 2.0), torch.relu(F.linear(x, w, bias)) / 2.0)
    assert cupy_ops.gemm_plan(base, w.T, bias_relu_scale=True).mode == "folded"
    assert cupy_ops.gemm_plan(base[:, 2:], w.T, bias_relu_scale=True).mode == "folded, a copied"


@pytest.mark.gpu
def test_gemm_plan_says_how_a_batch_runs(cuda):
    a, b = torch.randn(8, 64, 32, device=cuda), torch.randn(8, 32, 16, device=cuda)
    p = cupy_ops.gemm_plan(a, b)  # float32, TF32 off: simt, which has a batched kernel
    assert p.mode == "batched" and p.launches == 1 and p.family == "simt" and p.gemm.batch == 8
    assert "gemm_simt_batched" in p.kernel and "batch of 8" in str(p)
    p = cupy_ops.gemm_plan(a.double(), b.double())
    assert p.mode == "batched" and "gemm_naive_batched" in p.kernel
    p = cupy_ops.gemm_plan(a, b[0])
    assert p.mode == "folded" and p.launches == 1 and p.gemm.batch == 0
    p = cupy_ops.gemm_plan(a.half(), b.half())
    if HOPPER:  # the batched wgmma kernel
        assert p.mode == "batched" and p.launches == 1 and "gemm_wgmma_batched" in p.kernel
    else:  # tc has no batched kernel
        assert p.mode == "loop" and p.launches == 8 and p.gemm.batch == 0 and "8 launches" in str(p)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batched_kernels_on_batch_strides(cuda, dtype):
    """The batched kernels (simt: float32, naive: float64) over batch strides that keep or break
    16-byte alignment, stride-0 broadcasts, transposed operands, a split-K-sized product, and
    more entries than one launch's grid takes (65535)."""

    def t(*shape):
        return torch.randn(shape, device=cuda, dtype=dtype)

    cases = [
        (t(5, 130, 67), t(5, 67, 129)),  # sizes off the tile
        (t(5, 130, 68)[:, :, 1:], t(5, 67, 129)),  # batch stride 130 * 68, entries off 16 bytes
        (t(3, 7, 33, 20)[:, 1], t(3, 20, 18)),  # batch stride 7 * 33 * 20, rows 20 apart
        (t(1, 64, 48).expand(6, 64, 48), t(6, 48, 40)),  # a broadcast: stride 0
        (t(6, 48, 64).mT, t(6, 40, 48).mT),  # both transposed (M-major a, K-major b)
        (t(64, 48), t(6, 48, 40)),  # 2-D a against a batch of b
        (t(2, 256, 4096), t(2, 4096, 256)),  # long K (split-K alone)
    ]
    for a, b in cases:
        p = cupy_ops.gemm_plan(a, b)
        assert p.mode == "batched", str(p)
        _close(cupy_ops.matmul(a, b), torch.matmul(a, b))
    a, b = t(70000, 2, 3), t(70000, 3, 2)
    assert cupy_ops.gemm_plan(a, b).launches == 1
    _close(cupy_ops.matmul(a, b), torch.matmul(a, b))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_batched_wgmma_kernel(cuda, dtype):
    """The Hopper batched kernel (16-bit): entries whose M, N, K are off the tile (each entry's
    rows clipped by its own 3-D map, not spilling into the next), broadcasts (stride 0) of
    either operand, a K-major b, a 2-D a against a batch, and the widths 128 and 256."""
    if not HOPPER:
        pytest.skip("the batched wgmma kernel runs on Hopper (compute capability 9.0)")

    def t(*shape):
        return torch.randn(shape, device=cuda, dtype=dtype)

    cases = [
        (t(3, 200, 136), t(3, 136, 72)),  # M, N, K off the tiles; b N-major
        (t(32, 256, 128), t(32, 128, 256)),  # attention-like, 256-wide tiles
        (t(1, 130, 64).expand(5, 130, 64), t(5, 64, 40)),  # a broadcast
        (t(5, 130, 64), t(1, 64, 40).expand(5, 64, 40)),  # b broadcast
        (t(4, 96, 80), t(4, 24, 80).mT),  # b K-major (a transposed view)
        (t(96, 80), t(4, 80, 24)),  # 2-D a against a batch of b
        (t(2, 3, 70, 48), t(3, 48, 56)),  # two batch dimensions, b broadcast along the first
    ]
    for a, b in cases:
        p = cupy_ops.gemm_plan(a, b)
        assert p.mode == "batched" and "gemm_wgmma_batched" in p.kernel, str(p)
        _close(cupy_ops.matmul(a, b), torch.matmul(a, b))
    # entries 33 * 24 + 4 elements apart (rows 16-byte aligned, entries not): one GEMM per entry instead
    a = t(3 * (33 * 24 + 4)).as_strided((3, 33, 24), (33 * 24 + 4, 24, 1))
    b = t(3, 24, 16)
    assert cupy_ops.gemm_plan(a, b).mode == "loop"
    _close(cupy_ops.matmul(a, b), torch.matmul(a, b))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "dtype, algo, sa, sb, bt",
    [
        (torch.bfloat16, "auto", (32, 64, 64), (32, 64, 64), False),  # bench.host's batch of 32
        (torch.float16, "auto", (3, 200, 136), (3, 136, 72), False),  # off the tiles
        (torch.bfloat16, "auto", (4, 96, 80), (4, 80, 24), True),  # b K-major (a transposed view)
        (torch.float32, "simt", (5, 130, 67), (5, 67, 129), False),
        (torch.float32, "wgmma", (4, 96, 64), (4, 64, 160), False),  # TF32, swapped entry by entry
        (torch.float64, "auto", (3, 33, 20), (3, 20, 18), False),  # naive
        (torch.float32, "fp16x3", (2, 128, 256), (2, 256, 128), False),  # a loop over the batch
    ],
    ids=str,
)
def test_a_bmm_signature_seen_before_reads_each_calls_own_values(cuda, monkeypatch, dtype, algo, sa, sb, bt):
    """torch.bmm's case by signature (``gemm.product``: the checks and the plan once, a batched
    kernel's arguments packed once per address set) gives, call after call, what the general
    path gives bit for bit: new values at the same addresses, new tensors of the same
    signature, a broadcast a of the same strides; a family that loops over the batch (fp16x3 /
    tf32x3) is left to the general path."""
    if dtype != torch.float64 and algo == "auto" and not HOPPER:
        pytest.skip("the batched wgmma kernel runs on Hopper (compute capability 9.0)")
    if algo == "fp16x3" and not HOPPER:
        pytest.skip("fp16x3 runs on Hopper")
    taken, product = [], gemm.product
    monkeypatch.setattr(gemm, "product", lambda *a: taken.append(product(*a)) or taken[-1])
    g = torch.Generator(device=cuda).manual_seed(sum(sa) + sum(sb))

    def rnd(*shape):
        return torch.randn(*shape, device=cuda, generator=g).to(dtype)

    a, b = rnd(*sa), (rnd(sb[0], sb[2], sb[1]).mT if bt else rnd(*sb))
    for i in range(5):
        if i in (1, 3):  # new values where the last call read
            a.copy_(rnd(*sa))
            b.copy_(rnd(*b.shape))
        if i == 2:  # new tensors
            a = rnd(*sa)
        if i == 4:  # a broadcast entry where each entry had its own: another signature
            a = rnd(1, *sa[1:]).expand(sa)
        got = cupy_ops.matmul(a, b, algo=algo)
        assert (taken.pop() is not None) == (algo != "fp16x3"), i
        with monkeypatch.context() as m:
            m.setattr(gemm, "product", lambda *a: None)
            want = cupy_ops.matmul(a, b, algo=algo)
        assert_bitwise_equal(got, want)
        for j in range(a.shape[0]):  # within the rounding bound of each entry's product
            assert_gemm_close(got[j], a[j], b[j], operand_roundoff=roundoff(algo, dtype))


@pytest.mark.gpu
def test_batched_tc_and_tf32_kernels(cuda):
    """gemm_tc_batched (algo="tc", K-major b: a transposed view, read in place) and the batched
    wgmma kernel on TF32 (torch's TF32 switch on, K-major b), against torch under the same
    switch; a row-major b with TF32 swapped entry by entry (gemm_wgmma_batched_swap: sizes off
    the tiles, a broadcast b or a, 256-wide tiles past half a wave, a persistent walk), or copied
    K-major once where its rows are not 16-byte multiples."""

    def t(*shape, dtype=torch.bfloat16):
        return torch.randn(shape, device=cuda, dtype=dtype)

    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        a, b = t(3, 200, 72, dtype=dtype), t(3, 136, 72, dtype=dtype).mT
        p = cupy_ops.gemm_plan(a, b, algo="tc")
        assert p.mode == "batched" and "gemm_tc_batched" in p.kernel, str(p)
        got = cupy_ops.matmul(a, b, algo="tc")
        if dtype == torch.float32:  # tc rounds fp32 operands to TF32
            torch.testing.assert_close(got, a.double() @ b.double(), atol=0.05, rtol=0.01, check_dtype=False)
        else:
            _close(got, torch.matmul(a, b))
    if not HOPPER:
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        a, b = t(3, 200, 72, dtype=torch.float32), t(3, 136, 72, dtype=torch.float32).mT
        p = cupy_ops.gemm_plan(a, b)
        assert p.mode == "batched" and p.kernel.startswith("gemm_wgmma_batched<float"), str(p)
        # both TF32: torch's own tests compare TF32 GEMMs at 5e-3 (tf32_on_and_off(0.005))
        torch.testing.assert_close(cupy_ops.matmul(a, b), torch.matmul(a, b), atol=5e-3, rtol=5e-3)
        f32 = torch.float32
        cases = [
            (a, b.contiguous(), "gemm_wgmma_batched_swap<128,"),
            (a, t(1, 72, 136, dtype=f32).expand(3, 72, 136), "gemm_wgmma_batched_swap<128,"),  # b broadcast
            (t(1, 200, 72, dtype=f32).expand(3, 200, 72), b.contiguous(), "gemm_wgmma_batched_swap<128,"),  # a bcast
            (t(6, 130, 40, dtype=f32), t(6, 40, 300, dtype=f32), "gemm_wgmma_batched_swap<"),  # M, N, K off the tiles
            (t(40, 256, 64, dtype=f32), t(40, 64, 512, dtype=f32), "gemm_wgmma_batched_swap<256,"),  # persistent
            (a, t(3, 72, 70, dtype=f32), "gemm_wgmma_batched<float"),  # rows of 70 values: b copied K-major
        ]
        for x, bb, kernel in cases:
            p = cupy_ops.gemm_plan(x, bb)
            assert p.mode == "batched" and p.kernel.startswith(kernel), str(p)
            # both TF32, summed in other orders: of torch's error order against fp64
            assert_of_torchs_error_order(cupy_ops.matmul(x, bb), torch.matmul(x, bb), x.double() @ bb.double(), str(p))
        assert cupy_ops.gemm_plan(*cases[4][:2]).persistent
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _odd_layouts(t):
    """(a, b, what) for the batch layer's layout edges: each is legal for torch.matmul, and each
    breaks one assumption a 3-D TMA map or a per-signature launch could make."""
    base = t(4 * 72 * 136 + 1)
    return [
        (t(3, 200, 72), t(3, 72, 144)[..., :136], "b's rows padded (row stride 144, N 136)"),
        (t(3, 200, 72), t(3, 80, 136)[:, :72], "gaps between b's entries (entry stride 80 x 136)"),
        (t(3, 200, 72), t(3, 1, 136).expand(3, 72, 136), "b's rows one row (row stride 0)"),
        (t(3, 200, 72), t(3, 72, 1).expand(3, 72, 136), "b's columns one value (column stride 0)"),
        (t(3, 1, 72).expand(3, 200, 72), t(3, 72, 136), "a's rows one row (row stride 0)"),
        (t(3, 200, 1), t(3, 1, 136), "K = 1"),
        (t(3, 1, 72), t(3, 72, 136), "M = 1"),
        (t(3, 200, 72), t(3, 72, 4), "N = 4: one 16-byte row"),
        (t(2, 1, 200, 72), t(1, 3, 72, 136), "4-D, each operand broadcast along another dimension"),
        (t(3, 200, 73)[..., 1:], t(3, 72, 136), "a's storage offset one value: entries off 16 bytes"),
        (t(3, 200, 72), base[1:].view(4, 72, 136)[:3], "b's storage offset one value"),
        (t(3, 200, 72), base[: 72 * 136].as_strided((3, 72, 136), (8 * 136, 136, 1)), "b's entries overlap"),
        (t(3, 72, 200).mT, t(3, 72, 136), "a M-major (a transposed view)"),
        (t(3, 200, 72), t(3, 136, 72).mT[:, :, :100], "b K-major, a column slice of it"),
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_batched_kernels_on_odd_layouts(cuda, dtype):
    """Every odd layout of _odd_layouts, fp32 with torch's TF32 switch on (Hopper: the batched
    swapped kernel where b's layout allows a map, a copy or a loop where not) and 16-bit: torch's
    shape and dtype, each entry within the rounding bound of its product (TF32: operands rounded
    to TF32 first; torch's cuBLAS need not round them: at K = 1 it gave fp32's product), and a
    second call (torch.bmm's shapes: by signature) the first call's bits."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == torch.float32
    try:
        for a, b, what in _odd_layouts(lambda *s: torch.randn(s, device=cuda, dtype=dtype)):
            got, want = cupy_ops.matmul(a, b), torch.matmul(a, b)
            assert got.shape == want.shape and got.dtype == want.dtype, what
            batch = got.shape[:-2]
            xs, ys = a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])
            for x, y, z in zip(
                xs.reshape(-1, *a.shape[-2:]), ys.reshape(-1, *b.shape[-2:]), got.reshape(-1, *got.shape[-2:])
            ):
                try:
                    assert_gemm_close(z, x, y, operand_roundoff=roundoff("wgmma", dtype))  # TF32 on: rounded
                except AssertionError as e:
                    raise AssertionError(f"{what}: {cupy_ops.gemm_plan(a, b)}: {e}") from None
            assert_bitwise_equal(cupy_ops.matmul(a, b), got)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_matmul_on_views_and_broadcasts_against_torch(cuda, dtype):
    @FAST
    @given(data=st.data())
    def check(data):
        a, b = data.draw(matmul_operands(dtype, "cuda", max_size=40))
        got, expected = cupy_ops.matmul(a, b), torch.matmul(a, b)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        _close(got, expected)

    check()


@pytest.mark.gpu
def test_matmul_vmap_and_jvp_on_batched_and_1d_operands(cuda):
    from torch.func import jvp, vmap

    def t(*shape):
        return torch.randn(shape, device=cuda, dtype=torch.float64)

    # (a, b, in_dims): per entry matrix x vector, vector x vector, vector x matrix, batched x matrix, ...
    cases = [
        (t(3, 4, 5), t(3, 5), (0, 0)),
        (t(3, 5), t(3, 5), (0, 0)),
        (t(3, 5), t(5, 6), (0, None)),
        (
            t(
                5,
            ),
            t(3, 5, 6),
            (None, 0),
        ),
        (
            t(3, 5),
            t(
                5,
            ),
            (0, None),
        ),
        (t(4, 5), t(3, 5), (None, 0)),
        (t(3, 2, 4, 5), t(5, 6), (0, None)),
        (t(2, 4, 5), t(5, 6, 3), (None, 2)),
        (t(4, 3, 5), t(2, 5, 6), (1, None)),
    ]
    for a, b, in_dims in cases:
        _close(vmap(cupy_ops.matmul, in_dims=in_dims)(a, b), vmap(torch.matmul, in_dims=in_dims)(a, b))
    a, b = (
        t(3, 4, 5),
        t(
            5,
        ),
    )
    ta, tb = torch.randn_like(a), torch.randn_like(b)
    _close(jvp(cupy_ops.matmul, (a, b), (ta, tb)), jvp(torch.matmul, (a, b), (ta, tb)))
    w, bias = t(6, 5), t(6)
    _close(
        vmap(lambda x: cupy_ops.linear_relu_div(x, w, bias, 2.0))(a),
        vmap(lambda x: torch.relu(F.linear(x, w, bias)) / 2.0)(a),
    )
    tw = torch.randn_like(w)
    _close(
        jvp(lambda x, q: cupy_ops.linear_relu_div(x, q, bias, 2.0), (a, w), (ta, tw)),
        jvp(lambda x, q: torch.relu(F.linear(x, q, bias)) / 2.0, (a, w), (ta, tw)),
    )


@pytest.mark.gpu
def test_gradients_of_broadcast_batches_gradcheck(cuda):
    kw = dict(device=cuda, dtype=torch.float64, requires_grad=True)
    for sa, sb in (((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((4,), (4,))):
        a, b = torch.randn(sa, **kw), torch.randn(sb, **kw)
        assert torch.autograd.gradcheck(cupy_ops.matmul, (a, b))
        assert torch.autograd.gradgradcheck(cupy_ops.matmul, (a, b))
    x, w, bias = torch.randn(2, 3, 4, **kw), torch.randn(5, 4, **kw), torch.randn(5, **kw)
    assert torch.autograd.gradcheck(lambda *t: cupy_ops.linear_relu_div(*t, 2.0), (x, w, bias))
    assert torch.autograd.gradcheck(lambda *t: cupy_ops.linear_relu_div(*t, 2.0), (x[0, 0], w, bias))
