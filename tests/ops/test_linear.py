"""cupy_ops.linear with a user's epilogue, side by side with torch.

The epilogue of the family tests is written with the exact helpers (mul_exact, add_exact), so
its value is torch's chain on the Linear's output bit for bit: ``linear`` without an epilogue
gives that output through the same family, and torch computes the chain in the compute dtype
and rounds once, as the kernel's store does."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.ops import gemm

from conftest import assert_bitwise_equal, assert_of_torchs_error_order, require_algo
from gemm_checks import ALGO_DTYPES, TF32X3_ROUNDOFF, general_path, roundoff, seeded_randn, spy_layers

MIX = cupy_ops.epilogue(
    """__device__ acc_t apply(acc_t v, acc_t s, acc_t shift, acc_t row, acc_t res) {
         return add_exact(add_exact(mul_exact(v, s), shift), mul_exact(row, res)); }""",
    columns=("shift",),
    rows=("row",),
    tensors=("res",),
    scalars=("s",),
    name="mix",
)
# three columns: two read ahead with the bias (epilogues.AHEAD_COLUMNS), one by apply
THREE_COLUMNS = cupy_ops.epilogue(
    "__device__ acc_t apply(acc_t v, acc_t gain, acc_t row, acc_t shift, acc_t tilt) "
    "{ return mul_exact(add_exact(add_exact(mul_exact(v, gain), shift), tilt), row); }",
    columns=("gain", "shift", "tilt"),
    rows=("row",),
    name="three_columns",
)
LEAKY = cupy_ops.epilogue(
    "__device__ acc_t apply(acc_t v, acc_t slope) { return v > 0 ? v : v * slope; }",
    scalars=("slope",),
    derivative="__device__ acc_t grad(acc_t v, acc_t slope) { return v > 0 ? acc_t(1) : slope; }",
    name="leaky",
)
TANH = cupy_ops.epilogue("__device__ acc_t apply(acc_t v) { return tanh(v); }", name="tanh_no_grad")
RESIDUAL = cupy_ops.epilogue(
    "__device__ acc_t apply(acc_t v, acc_t res) { return v + res; }",
    tensors=("res",),
    derivative="__device__ acc_t grad(acc_t v, acc_t res) { return acc_t(1); }",
    name="residual",
)

# divides (IEEE division: a branch to its slow path), reads a column, a row, a tensor and a
# scalar; its derivative too: the cost model applies both by a pass after the GEMM on large outputs
DIVIDES = cupy_ops.epilogue(
    """__device__ acc_t apply(acc_t v, acc_t s, acc_t shift, acc_t row, acc_t res) {
         return round_out(v / (exp(v * s) + acc_t(2))) + shift * row + res; }""",
    columns=("shift",),
    rows=("row",),
    tensors=("res",),
    scalars=("s",),
    derivative="""__device__ acc_t grad(acc_t v, acc_t s, acc_t shift, acc_t row, acc_t res) {
         acc_t e = exp(v * s); return (e + 2 - v * s * e) / ((e + 2) * (e + 2)); }""",
    name="divides",
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kernelbench_level2.py"


def _mix_in_torch(v, s, shift, row, res):
    c = torch.float64 if v.dtype == torch.float64 else torch.float32
    return (v.to(c) * s + shift.to(c) + row.to(c)[..., None] * res.to(c)).to(v.dtype)


@pytest.mark.parametrize("algo, dtype", ALGO_DTYPES, ids=str)
@pytest.mark.parametrize("M, K, N", [(1, 1, 1), (3, 5, 7), (128, 129, 127), (257, 64, 300), (33, 4097, 65)], ids=str)
def test_every_family_applies_columns_rows_tensors_and_scalars_as_torch(M, K, N, algo, dtype, cuda):
    require_algo(algo)
    g = torch.Generator(device=cuda).manual_seed(M * 1000 + N)

    def rnd(*shape):
        return torch.randn(*shape, device=cuda, generator=g).to(dtype)

    x, w, b, shift, row, res = rnd(M, K), rnd(N, K), rnd(N), rnd(N), rnd(M), rnd(N, M).t()  # res column-major
    got = cupy_ops.linear(x, w, b, epilogue=MIX, algo=algo, s=-1.5, shift=shift, row=row, res=res)
    v = cupy_ops.linear(x, w, b, algo=algo)
    assert_bitwise_equal(got, _mix_in_torch(v, -1.5, shift, row, res))
    gain, tilt, c = rnd(N), rnd(N), torch.float64 if dtype == torch.float64 else torch.float32
    got = cupy_ops.linear(x, w, b, epilogue=THREE_COLUMNS, algo=algo, gain=gain, shift=shift, tilt=tilt, row=row)
    want = (v.to(c) * gain.to(c) + shift.to(c) + tilt.to(c)) * row.to(c)[..., None]
    assert_bitwise_equal(got, want.to(dtype))
    if roundoff(algo, dtype) <= TF32X3_ROUNDOFF:  # (TF32 products: the tolerance of tests/ops/test_matmul.py)
        assert_of_torchs_error_order(v, F.linear(x, w, b), F.linear(x.double(), w.double(), b.double()), "linear")


def test_leading_dimensions_fold_into_rows(cuda):
    x = torch.randn(2, 3, 5, 16, device=cuda)[:, :, ::2]  # (2, 3, 3, 16), not foldable as a view
    w, shift = torch.randn(8, 16, device=cuda), torch.randn(8, device=cuda)
    row, res = torch.randn(2, 3, 3, device=cuda), torch.randn(2, 3, 3, 8, device=cuda)
    got = cupy_ops.linear(x, w, None, epilogue=MIX, s=2.0, shift=shift, row=row, res=res)
    v = cupy_ops.linear(x, w)
    assert got.shape == (2, 3, 3, 8)
    assert_bitwise_equal(got, _mix_in_torch(v, 2.0, shift, row, res))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_without_an_epilogue_it_is_f_linear(dtype, cuda):
    x, w, b = (torch.randn(*s, device=cuda, dtype=dtype) for s in ((64, 96), (48, 96), (48,)))
    exact = F.linear(x.double(), w.double(), b.double())
    assert_of_torchs_error_order(cupy_ops.linear(x, w, b), F.linear(x, w, b), exact, "linear")


def _example():
    spec = importlib.util.spec_from_file_location("kernelbench_level2", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("number", [12, 29, 70, 76, 86, 99])
def test_the_kernelbench_examples_match_their_models(number, dtype, cuda):
    ok, ours, theirs = _example().check(number, 96, 320, 200, dtype)
    assert ok
    assert ours <= 4 * theirs + torch.finfo(dtype).eps, (ours, theirs)


def test_gradcheck_in_float64_with_a_derivative(cuda):
    x, w, b = (torch.randn(*s, device=cuda, dtype=torch.float64, requires_grad=True) for s in ((5, 7), (3, 7), (3,)))
    assert torch.autograd.gradcheck(lambda x, w, b: cupy_ops.linear(x, w, b, epilogue=LEAKY, slope=0.2), (x, w, b))


def test_the_gradient_is_torchs_chain_rule(cuda):
    x, w, b = (torch.randn(*s, device=cuda, requires_grad=True) for s in ((64, 40), (24, 40), (24,)))
    dy = torch.randn(64, 24, device=cuda)
    ours = torch.autograd.grad(cupy_ops.linear(x, w, b, epilogue=LEAKY, algo="accurate", slope=0.3), (x, w, b), dy)
    theirs = torch.autograd.grad(F.leaky_relu(F.linear(x, w, b), 0.3), (x, w, b), dy)
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    exact = torch.autograd.grad(F.leaky_relu(F.linear(x64, w64, b64), 0.3), (x64, w64, b64), dy.double())
    for name, o, t, e in zip(("x", "weight", "bias"), ours, theirs, exact):
        assert_of_torchs_error_order(o, t, e, f"d{name}")


def test_without_an_epilogue_it_trains_as_f_linear(cuda):
    """No epilogue: the gradient is F.linear's (no derivative to declare), to second order."""
    x, w, b = (torch.randn(*s, device=cuda, dtype=torch.float64, requires_grad=True) for s in ((2, 5, 7), (3, 7), (3,)))
    assert torch.autograd.gradcheck(lambda x, w, b: cupy_ops.linear(x, w, b), (x, w, b))
    assert torch.autograd.gradgradcheck(lambda x, w, b: cupy_ops.linear(x, w, b), (x, w, b))
    x, w, b = (t.detach().float().requires_grad_() for t in (x, w, b))
    dy = torch.randn(2, 5, 3, device=cuda)
    ours = torch.autograd.grad(cupy_ops.linear(x, w, b, algo="accurate"), (x, w, b), dy)
    theirs = torch.autograd.grad(F.linear(x, w, b), (x, w, b), dy)
    x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
    exact = torch.autograd.grad(F.linear(x64, w64, b64), (x64, w64, b64), dy.double())
    for name, o, t, e in zip(("x", "weight", "bias"), ours, theirs, exact):
        assert_of_torchs_error_order(o, t, e, f"d{name}")


def test_backward_without_a_derivative_names_the_epilogue(cuda):
    x = torch.randn(4, 8, device=cuda, requires_grad=True)
    y = cupy_ops.linear(x, torch.randn(3, 8, device=cuda), epilogue=TANH)
    with pytest.raises(NotImplementedError, match="tanh_no_grad has no derivative"):
        y.sum().backward()


def test_a_tensor_of_the_epilogue_that_requires_grad_is_named_in_backward(cuda):
    """The derivative is with respect to the Linear's output only: backward through a residual
    that requires grad names it; one that does not is fine (x's gradient flows)."""
    x, w = torch.randn(6, 8, device=cuda, requires_grad=True), torch.randn(5, 8, device=cuda)
    res = torch.randn(6, 5, device=cuda)
    (gx,) = torch.autograd.grad(cupy_ops.linear(x, w, epilogue=RESIDUAL, res=res).sum(), (x,))
    assert torch.allclose(gx, w.sum(0).expand(6, 8))
    y = cupy_ops.linear(x, w, epilogue=RESIDUAL, res=res.requires_grad_())
    with pytest.raises(NotImplementedError, match="epilogue residual: no gradient with respect to its tensor 'res'"):
        y.sum().backward()


def test_autocast_casts_the_epilogues_tensors_too(cuda):
    """Under autocast a float32 residual is cast to the autocast dtype with x and the weight (the
    documented divergence: torch would add it to the bfloat16 Linear output in float32)."""
    x, w, res = torch.randn(32, 64, device=cuda), torch.randn(16, 64, device=cuda), torch.randn(32, 16, device=cuda)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got = cupy_ops.linear(x, w, epilogue=RESIDUAL, res=res)
        theirs = F.linear(x, w) + res
    assert got.dtype == torch.bfloat16 and theirs.dtype == torch.float32
    assert_bitwise_equal(got, cupy_ops.linear(x.bfloat16(), w.bfloat16(), epilogue=RESIDUAL, res=res.bfloat16()))


def test_under_compile_fullgraph_autocast_and_a_cuda_graph(cuda):
    x, w, b = (torch.randn(*s, device=cuda) for s in ((32, 64), (16, 64), (16,)))
    eager = cupy_ops.linear(x, w, b, epilogue=LEAKY, slope=0.1)
    fn = torch.compile(lambda x, s: cupy_ops.linear(x, w, b, epilogue=LEAKY, slope=s), fullgraph=True)
    assert_bitwise_equal(fn(x, 0.1), eager)
    assert_bitwise_equal(fn(x, 0.25), cupy_ops.linear(x, w, b, epilogue=LEAKY, slope=0.25))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        cast = cupy_ops.linear(x, w, b, epilogue=LEAKY, slope=0.1)
    assert cast.dtype == torch.bfloat16
    assert_bitwise_equal(cast, cupy_ops.linear(x.bfloat16(), w.bfloat16(), b.bfloat16(), epilogue=LEAKY, slope=0.1))
    static = x.clone()
    cupy_ops.linear(static, w, b, epilogue=LEAKY, slope=0.1)  # compiled and planned before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = cupy_ops.linear(static, w, b, epilogue=LEAKY, slope=0.1)
    static.copy_(x * 2)
    graph.replay()
    assert_bitwise_equal(captured, cupy_ops.linear(x * 2, w, b, epilogue=LEAKY, slope=0.1))


def test_opcheck(cuda):
    from cupy_ops.ops.linear import _op

    x, w, b, shift, row, res = (torch.randn(*s, device=cuda) for s in ((6, 8), (5, 8), (5,), (5,), (6,), (6, 5)))
    torch.library.opcheck(_op(MIX).overload, (x, w, b, shift, row, res, 0.5, "auto"))
    xg = x.clone().requires_grad_()
    torch.library.opcheck(_op(LEAKY).overload, (xg, w, b, 0.1, "auto"))


def test_keywords_and_devices_are_checked_before_any_launch():
    """On the CPU: a keyword that is no parameter (the bias is bias=), and CPU tensors, sparse ones
    too."""
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) b \(the bias is bias="):
        cupy_ops.linear(x, w, b=torch.randn(3))
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):
        cupy_ops.linear(x, w, epilogue=LEAKY, slope=0.1)
    with pytest.raises(TypeError, match=r"epilogue must be a cupy_ops\.epilogue"):
        cupy_ops.linear(x, w, epilogue="leaky", slope=0.1)
    # tensors without strides (sparse) get the same typed errors (the signature path reads strides)
    for args, kw in (
        ((x.to_sparse(), w), {}),
        ((x, w.to_sparse()), {}),
        ((x, w), dict(epilogue=RESIDUAL, res=torch.randn(4, 3).to_sparse())),
    ):
        with pytest.raises(ValueError, match="must be a CUDA tensor"):
            cupy_ops.linear(*args, **kw)
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):
        cupy_ops.linear_relu_div(x.to_sparse_csr(), w, None, 2.0)


def test_argument_errors_name_the_parameter(cuda):
    x, w = torch.randn(4, 8, device=cuda), torch.randn(3, 8, device=cuda)
    with pytest.raises(TypeError, match="missing: slope"):
        cupy_ops.linear(x, w, epilogue=LEAKY)
    with pytest.raises(TypeError, match="unknown: slop"):
        cupy_ops.linear(x, w, epilogue=LEAKY, slope=0.1, slop=0.2)
    with pytest.raises(ValueError, match=r"shift .* must have shape \(3,\)"):
        cupy_ops.linear(x, w, epilogue=MIX, s=1.0, shift=torch.randn(4, device=cuda), row=x[:, 0], res=x[:, :3])
    with pytest.raises(TypeError, match="same dtype as x"):
        shift = torch.randn(3, device=cuda).double()
        cupy_ops.linear(x, w, epilogue=MIX, s=1.0, shift=shift, row=x[:, 0], res=x[:, :3])
    with pytest.raises(TypeError, match="real number"):
        cupy_ops.linear(x, w, epilogue=LEAKY, slope="0.1")
    assert math.isfinite(cupy_ops.linear(x, w, epilogue=LEAKY, slope=True).sum().item())


@pytest.mark.parametrize(
    "algo, dtype, M, K, N",
    [
        ("fp16x3", torch.float32, 256, 384, 512),  # t from A's columns
        ("fp16x3", torch.float32, 512, 384, 256),  # t from the weight's rows
        ("fp16x3", torch.float32, 128, 8192, 256),  # split-K and its reduction
        ("accurate", torch.float32, 64, 96, 80),
        ("auto", torch.bfloat16, 256, 384, 512),
        ("auto", torch.float16, 64, 8192, 128),
        ("simt", torch.float32, 34, 65, 17),
    ],
    ids=str,
)
def test_a_signature_seen_before_reads_each_calls_own_values(algo, dtype, M, K, N, cuda, monkeypatch):
    """The eager path by signature (``gemm.layer``: the checks and the plan once, the arguments
    packed once per address set) gives, call after call, what the general path gives for the
    same arguments bit for bit: new values at the same addresses (x, the weight, the epilogue's
    tensors edited in place), new tensors of the same signature, new scalars, x of three
    dimensions folded into rows, and no bias."""
    require_algo(algo)
    rnd, entries = seeded_randn(cuda, dtype, M + K + N), spy_layers(monkeypatch)
    x, w, b, shift, row, res = rnd(M, K), rnd(N, K), rnd(N), rnd(N), rnd(M), rnd(M, N)
    for i, s in enumerate((-1.5, 2, 0.25, -0.0, 3.0, 1e-3)):
        if i in (1, 4):  # new values where the last call read
            for t in (x, w, shift, res):
                t.copy_(rnd(*t.shape))
        if i == 2:  # new tensors
            x, shift, row, res = rnd(M, K), rnd(N), rnd(M), rnd(M, N)
        xi = x.view(2, M // 2, K) if i == 3 else x
        args = (xi, w, None if i == 5 else b)
        kw = dict(
            epilogue=MIX, algo=algo, s=s, shift=shift, row=row.view(xi.shape[:-1]), res=res.view(xi.shape[:-1] + (N,))
        )
        got = cupy_ops.linear(*args, **kw)
        assert entries.pop() is not None  # (this path took it)
        with general_path(monkeypatch):
            want = cupy_ops.linear(*args, **kw)
        assert_bitwise_equal(got, want)
        v = cupy_ops.linear(*args, algo=algo)  # torch's chain on the Linear's output: the values read are this call's
        assert_bitwise_equal(got, _mix_in_torch(v, s, shift, kw["row"], kw["res"]))


def _by_plan(tag, x, w, b, tensors, s, algo, dy=None, **overrides):
    """``tag``'s epilogue over ``F.linear(x, w, b)`` (2-D) by ``gemm.plan_for`` with
    ``overrides``, run as the plan says; and the plan."""
    from cupy_ops.ops.gemm import epilogues

    M, N = x.shape[0], w.shape[0]
    ptrs = [t.data_ptr() for t in tensors] + ([] if dy is None else [dy.data_ptr()])
    lds = [0, 0, N] + ([] if dy is None else [N])
    p = gemm.plan_for(x, w.t(), tag, algo, **overrides)
    c = torch.empty(M, N, device=x.device, dtype=x.dtype)
    gemm.run(p, x, w.t(), c, epi=epilogues.args(b.data_ptr(), ptrs, lds, [s], M, N))
    return c, p


@pytest.mark.parametrize("algo, dtype", ALGO_DTYPES, ids=str)
@pytest.mark.parametrize("M, K, N", [(3, 5, 7), (257, 64, 300), (130, 1000, 521), (1024, 256, 2048)], ids=str)
def test_an_epilogue_by_a_pass_after_the_gemm_gives_the_bits_of_the_store(M, K, N, algo, dtype, cuda):
    """The GEMM storing the Linear's output and the pass applying the epilogue to it in place
    give what the kernel's store gives, bit for bit: forward and derivative (``dy``), every
    family, a split-K plan keeping its reduction (which applies the epilogue)."""
    require_algo(algo)
    rnd = seeded_randn(cuda, dtype, M * 7 + N)
    x, w, b, shift, row, res, dy = rnd(M, K), rnd(N, K), rnd(N), rnd(N), rnd(M), rnd(M, N), rnd(M, N)
    x[0, 0] = float("nan")
    took = 0
    for tag, d in ((DIVIDES.tag, None), (DIVIDES.grad_tag, dy)):
        at_store, p0 = _by_plan(tag, x, w, b, (shift, row, res), -0.75, algo, d, after=False)
        after, p1 = _by_plan(tag, x, w, b, (shift, row, res), -0.75, algo, d, after=True)
        assert p0.after is None and (p1.after == tag) == (p1.reduce is None), p1
        took += p1.after is not None
        assert_bitwise_equal(after, at_store)
    assert took or p1.reduce is not None, "no plan took the pass"


@pytest.mark.parametrize("M, K, N", [(130, 1000, 300), (200, 3000, 136), (128, 4096, 1024)], ids=str)
def test_tf32x3_swapping_a_k_major_weight_applies_the_epilogue_at_cs_coordinates(M, K, N, cuda):
    """tf32x3 with A split by a pass runs a Linear as C^T = W x^T, its store transposed: the
    epilogue's column, row, tensor and scalar still land on C's (m, n), bit for bit torch's
    chain on the same plan's Linear output (partial tiles; split-K, whose reduction applies it)."""
    from cupy_ops.ops.gemm import epilogues

    require_algo("tf32x3")
    rnd = seeded_randn(cuda, torch.float32, M * 3 + N)
    x, w, b, shift, row, res = rnd(M, K), rnd(N, K), rnd(N), rnd(N), rnd(M), rnd(M, N)
    got, p = _by_plan(MIX.tag, x, w, b, (shift, row, res), -1.5, "tf32x3", presplit=True)
    v, p0 = _by_plan(epilogues.LINEAR.tag, x, w, b, (), 1.0, "tf32x3", presplit=True)
    kmajor = ("gemm_tf32x3_swap_pre<128, true", "gemm_tf32x3_swap_pre_partial<128, true")  # the weight K-major
    assert p.kernel.startswith(kmajor) and p0.kernel.startswith(kmajor), p
    assert_bitwise_equal(got, _mix_in_torch(v, -1.5, shift, row, res))
    assert_of_torchs_error_order(v, F.linear(x, w, b), F.linear(x.double(), w.double(), b.double()), "linear")


def test_the_cost_model_takes_the_pass_for_a_large_output_through_linear(cuda):
    """Where the cost model takes the pass (bf16, 2048 x 4096, one division), linear's
    eager path, torch.compile (fullgraph), a CUDA graph and backward give the bits of the
    epilogue at the store."""
    require_algo("wgmma")
    rnd = seeded_randn(cuda, torch.bfloat16, 5)
    x, w, b, shift, row, res = rnd(2048, 256), rnd(4096, 256), rnd(4096), rnd(4096), rnd(2048), rnd(2048, 4096)
    kw = dict(epilogue=DIVIDES, s=0.5, shift=shift, row=row, res=res)
    assert gemm.plan_for(x, w.t(), DIVIDES.tag).after == DIVIDES.tag
    want, _ = _by_plan(DIVIDES.tag, x, w, b, (shift, row, res), 0.5, "auto", after=False)
    assert_bitwise_equal(cupy_ops.linear(x, w, b, **kw), want)
    fn = torch.compile(lambda x: cupy_ops.linear(x, w, b, **kw), fullgraph=True)
    assert_bitwise_equal(fn(x), want)
    static = x.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = cupy_ops.linear(static, w, b, **kw)
    static.copy_(x)
    graph.replay()
    assert_bitwise_equal(captured, want)
    dy = rnd(2048, 4096)
    xg = x.clone().requires_grad_()
    (gx,) = torch.autograd.grad(cupy_ops.linear(xg, w, b, **kw), (xg,), dy)
    dz = _by_plan(DIVIDES.grad_tag, x, w, b, (shift, row, res), 0.5, "auto", dy, after=False)[0]
    assert gemm.plan_for(x, w.t(), DIVIDES.grad_tag).after == DIVIDES.grad_tag
    assert_bitwise_equal(gx, cupy_ops.matmul(dz, w))
