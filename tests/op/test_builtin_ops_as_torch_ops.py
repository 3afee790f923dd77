"""The built-in ops as first-class torch ops, side by side with torch on generated inputs:
every divisor kind and magnitude (the extremes the fused epilogue once flushed), torch.compile
with scalars the process has not seen, autocast dtypes and values, forward-mode AD, torch.func
jvp / vmap / grad, out= and in place as torch resizes and refuses, opcheck over every op, and the
shapes at each kernel's limits that "auto" and the ModelNews must still compute."""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import cupy_ops
from cupy_ops.models import linear_relu_div as lrd_model
from cupy_ops.models import matmul as mm_model

from conftest import HOPPER, assert_bitwise_equal, special_values
from elementwise_cases import MANY_DIVISORS

pytestmark = pytest.mark.gpu
_rng = np.random.default_rng(5)


def number_kinds(d: float):
    """Every kind of host number torch divides by, holding (about) ``d``."""
    with np.errstate(over="ignore"):
        kinds = {
            "float": d,
            "np.float64": np.float64(d),
            "np.float32": np.float32(d),
            "cpu float64": torch.tensor(d, dtype=torch.float64),
            "cpu float32": torch.tensor(d).float(),
        }
    if math.isfinite(d) and abs(d) < 2**62:
        kinds["int"] = int(d) or 1
        kinds["np.int64"] = np.int64(int(d) or 1)
    return kinds


EXTREME = MANY_DIVISORS + [2.0**126 * 1.5, -(2.0**127), 3.4e38, 1e-38, 2.0**-130, True, False]


def gemm_families(dtype):
    fams = ["auto", "accurate", "naive"] + (["simt"] if dtype == torch.float32 else [])
    if HOPPER and dtype != torch.float64:
        fams += ["wgmma"] + (["tf32x3", "fp16x3"] if dtype == torch.float32 else [])
    return fams


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
def test_linear_relu_div_applies_every_divisor_as_torch_divides_the_layer(dtype, cuda):
    """The epilogue's scale is torch's: linear_relu_div(x, w, b, d) is, bit for bit, torch's
    division of the same fused layer without the divide -- for every divisor kind and magnitude,
    |d| past 2^126 (a subnormal fp32 scale) included."""
    x = torch.randn(70, 96, device=cuda).to(dtype) * 3
    w = torch.randn(40, 96, device=cuda).to(dtype)
    b = torch.randn(40, device=cuda).to(dtype)
    for algo in gemm_families(dtype):
        r = cupy_ops.linear_relu(x, w, b, algo=algo)
        for d in EXTREME:
            for kind, obj in (number_kinds(float(d)) if not isinstance(d, bool) else {"bool": d}).items():
                got = cupy_ops.linear_relu_div(x, w, b, obj, algo=algo)
                assert_bitwise_equal(got, r / obj), (algo, d, kind)


def test_relu_div_takes_bools_and_extreme_divisors_bit_for_bit(cuda):
    x = torch.cat([special_values(torch.float32, cuda), torch.randn(3000, device=cuda) * 1e30])
    for d in EXTREME:
        for obj in [d] if isinstance(d, bool) else number_kinds(float(d)).values():
            assert_bitwise_equal(cupy_ops.relu_div(x, obj), torch.relu(x) / obj)


def test_compile_fullgraph_with_scalars_this_process_never_used(cuda):
    torch._dynamo.reset()
    x = torch.randn(257, 129, device=cuda)
    w = torch.randn(64, 129, device=cuda)
    b = torch.randn(64, device=cuda)
    f_rd = torch.compile(lambda t, d: cupy_ops.relu_div(t, d), fullgraph=True)
    f_lrd = torch.compile(lambda t, d: cupy_ops.linear_relu_div(t, w, b, d), fullgraph=True)
    torch.manual_seed(42)
    cublas = torch.compile(lrd_model.ModelNewCublas(129, 64, 2.0).to(cuda), fullgraph=True)
    for d in [float(v) for v in _rng.uniform(-1e3, 1e3, 4)] + [1e-35, 3e38]:
        assert_bitwise_equal(f_rd(x, d), torch.relu(x) / d)
        assert_bitwise_equal(f_lrd(x, d), cupy_ops.linear_relu(x, w, b) / d)
        cublas.divisor = d
        assert_bitwise_equal(cublas(x), torch.relu(cublas.linear(x)) / d)
    for d in (torch.tensor(3.5), torch.tensor(-0.25, device=cuda)):  # divisor tensors, CPU and CUDA
        torch.testing.assert_close(f_rd(x, d), torch.relu(x) / d, rtol=0, atol=0)
    torch.testing.assert_close(
        f_lrd(x, torch.tensor(7.0)), cupy_ops.linear_relu(x, w, b) / torch.tensor(7.0), rtol=0, atol=0
    )


@pytest.mark.parametrize("d", [np.float64(-2.5), np.float32(3.0), np.int64(7), np.bool_(True)], ids=repr)
def test_compile_fullgraph_takes_numpy_scalar_divisors_as_torch_does(d, cuda):
    """torch.compile makes a numpy scalar a 0-dim tensor input and divides by it; relu_div,
    relu_div_ and linear_relu_div take it the same way, bit for bit with torch's compiled
    division (every numpy kind failed in the fake: "Expected a value of type 'number'")."""
    x = torch.randn(257, 129, device=cuda)
    w = torch.randn(64, 129, device=cuda)
    b = torch.randn(64, device=cuda)

    def in_place(t):
        t = t * 1.0
        return cupy_ops.relu_div_(t, d)

    cases = (
        (lambda t: cupy_ops.relu_div(t, d), lambda t: torch.relu(t) / d),
        (in_place, lambda t: torch.relu(t * 1.0) / d),
        (lambda t: cupy_ops.linear_relu_div(t, w, b, d), lambda t: cupy_ops.linear_relu(t, w, b) / d),
    )
    for ours, theirs in cases:
        torch._dynamo.reset()
        got = torch.compile(ours, fullgraph=True)(x)
        want = torch.compile(theirs, fullgraph=True)(x)
        assert got.dtype == want.dtype == torch.float32
        assert_bitwise_equal(got, want)


def test_compile_fullgraph_in_place_and_out(cuda):
    def in_place(t):
        t = t * 1.0
        cupy_ops.relu_(t)
        cupy_ops.relu_div_(t, 3.0)
        return t

    def with_out(t):
        o = torch.empty_like(t)
        cupy_ops.relu_div(t, 2.0, out=o)
        return o

    x = torch.randn(1000, device=cuda)
    for fn, ref in ((in_place, torch.relu(x) / 3.0), (with_out, torch.relu(x) / 2.0)):
        torch._dynamo.reset()
        assert_bitwise_equal(torch.compile(fn, fullgraph=True)(x), ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_autocast_gives_torchs_dtypes_and_values(dtype, cuda):
    x = torch.randn(64, 96, device=cuda)
    w = torch.randn(32, 96, device=cuda)
    b = torch.randn(32, device=cuda)
    torch.manual_seed(0)
    ref = lrd_model.Model(96, 32, 2.0).to(cuda)
    torch.manual_seed(0)
    new = lrd_model.ModelNew(96, 32, 2.0).to(cuda)
    with torch.autocast("cuda", dtype=dtype), torch.no_grad():
        cases = [
            (cupy_ops.matmul(x, w.t()), x @ w.t()),
            (cupy_ops.linear_relu_div(x, w, b, 2.0), torch.relu(F.linear(x, w, b)) / 2.0),
            (new(x), ref(x)),
            (mm_model.ModelNew()(x, w.t()), mm_model.Model()(x, w.t())),
            (cupy_ops.relu(x), torch.relu(x)),
            (cupy_ops.relu_div(x, 3.0), torch.relu(x) / 3.0),
        ]
    for got, want in cases:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        torch.testing.assert_close(got.float(), want.float(), atol=0.05, rtol=0.02)


def test_autocast_under_compile_and_autograd(cuda):
    x = torch.randn(64, 96, device=cuda)
    w = torch.randn(32, 96, device=cuda, requires_grad=True)
    torch._dynamo.reset()
    f = torch.compile(lambda t: cupy_ops.linear_relu_div(t, w, None, 2.0), fullgraph=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y, y_eager = f(x), cupy_ops.linear_relu_div(x, w, None, 2.0)
    assert y.dtype == y_eager.dtype == torch.bfloat16
    y.float().sum().backward()
    assert w.grad is not None and w.grad.dtype == torch.float32


def _torch_expr(name):
    return {
        "relu": torch.relu,
        "relu_div": lambda t: torch.relu(t) / 3.0,
        "matmul": lambda a, b: a @ b,
        "linear_relu_div": lambda a, w, b: torch.relu(F.linear(a, w, b)) / 2.0,
    }[name]


def _ours(name):
    return {
        "relu": cupy_ops.relu,
        "relu_div": lambda t: cupy_ops.relu_div(t, 3.0),
        "matmul": cupy_ops.matmul,
        "linear_relu_div": lambda a, w, b: cupy_ops.linear_relu_div(a, w, b, 2.0),
    }[name]


def _primals(name, cuda):
    g = torch.Generator(device=cuda).manual_seed(7)
    r = lambda *s: torch.randn(*s, device=cuda, dtype=torch.float64, generator=g)  # noqa: E731
    return {
        "relu": (r(30, 17),),
        "relu_div": (r(30, 17),),
        "matmul": (r(9, 12), r(12, 5)),
        "linear_relu_div": (r(9, 12), r(5, 12), r(5)),
    }[name]


@pytest.mark.parametrize("name", ["relu", "relu_div", "matmul", "linear_relu_div"])
def test_forward_mode_ad_jvp_vmap_and_grad_match_torch(name, cuda):
    primals = _primals(name, cuda)
    tangents = tuple(torch.randn_like(p) for p in primals)
    ours, ref = _ours(name), _torch_expr(name)
    with fwAD.dual_level():
        got = fwAD.unpack_dual(ours(*[fwAD.make_dual(p, t) for p, t in zip(primals, tangents)])).tangent
        want = fwAD.unpack_dual(ref(*[fwAD.make_dual(p, t) for p, t in zip(primals, tangents)])).tangent
    assert got is not None
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.func.jvp(ours, primals, tangents)[1], torch.func.jvp(ref, primals, tangents)[1])
    batched = tuple(torch.stack([p, 2 * p, -p]) for p in primals)
    torch.testing.assert_close(torch.func.vmap(ours)(*batched), torch.func.vmap(ref)(*batched))
    loss = lambda f: lambda *a: f(*a).sum()  # noqa: E731
    for g1, g2 in zip(
        torch.func.grad(loss(ours), argnums=tuple(range(len(primals))))(*primals),
        torch.func.grad(loss(ref), argnums=tuple(range(len(primals))))(*primals),
    ):
        torch.testing.assert_close(g1, g2)
    torch.testing.assert_close(torch.func.jacfwd(ours)(*primals), torch.func.jacfwd(ref)(*primals))


def test_out_resizes_as_torch_does(cuda):
    x = torch.randn(4, 6, device=cuda)
    empty = torch.empty(0, device=cuda)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cupy_ops.relu(x, out=empty)
    assert_bitwise_equal(empty, torch.relu(x))
    wrong = torch.empty(5, device=cuda)
    with pytest.warns(UserWarning, match="was resized"):
        cupy_ops.relu_div(x, 2.0, out=wrong)
    assert_bitwise_equal(wrong, torch.relu(x) / 2.0)


def test_opcheck_over_every_op_on_generated_inputs(cuda):
    g = torch.Generator(device=cuda).manual_seed(3)
    cases = []
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        r = lambda *s, grad=False: torch.randn(*s, device=cuda, generator=g).to(dtype).requires_grad_(grad)  # noqa: E731
        x = r(33, 65, grad=dtype != torch.bfloat16)
        for view in (x, x.detach().t(), x.detach()[:, ::2], r(0, 5), r(1)):
            cases += [
                (torch.ops.cupy_ops.relu.default, (view,)),
                (torch.ops.cupy_ops.relu_div.default, (view, -2.5)),
                (torch.ops.cupy_ops.relu_backward.default, (view, torch.randn_like(view.detach()), 4.0)),
            ]
        cases += [
            (torch.ops.cupy_ops.relu_out.default, (torch.empty_like(x.detach()), x.detach())),
            (torch.ops.cupy_ops.relu_div_out.default, (torch.empty_like(x.detach()), x.detach(), 3.0)),
        ]
        a, b = r(17, 9, grad=True), r(9, 11, grad=True)
        w, bias = r(11, 9, grad=True), r(11, grad=True)
        for algo in ("auto", "naive"):
            cases += [
                (torch.ops.cupy_ops.matmul.default, (a, b, algo)),
                (torch.ops.cupy_ops.matmul.default, (a.detach().t().contiguous().t(), b, algo)),
                (torch.ops.cupy_ops.matmul.default, (r(0, 9), b, algo)),
                (
                    torch.ops.cupy_ops.matmul_out.default,
                    (torch.empty(17, 11, device=cuda, dtype=dtype), a.detach(), b.detach(), algo),
                ),
                (torch.ops.cupy_ops.linear_relu.default, (a, w, bias, algo)),
                (torch.ops.cupy_ops.linear_relu.default, (a, w, None, algo)),
                (torch.ops.cupy_ops.linear_relu_div.default, (a, w, bias, 2.0, algo)),
                (torch.ops.cupy_ops.linear_relu_div.default, (a, w, None, -0.5, algo)),
            ]
    for op, args in cases:
        torch.library.opcheck(op, args)


def test_tf32x3_computes_outputs_wider_than_the_grid_with_a_row_major_b(cuda):
    """N past 65,535 row tiles of C^T: the plan transposes b instead of C^T = B^T A^T (once a
    driver error)."""
    if not HOPPER:
        pytest.skip("algo='tf32x3' needs a Hopper GPU")
    N = 65535 * 128 + 1
    a = torch.randn(3, 8, device=cuda)
    b = torch.randn(8, N, device=cuda)
    p = cupy_ops.gemm_plan(a, b, algo="tf32x3")
    assert not p.swap
    got = cupy_ops.matmul(a, b, algo="tf32x3")
    want = a.double() @ b.double()
    assert (got.double() - want).abs().max() <= 1e-5 * want.abs().max()


def test_model_new_computes_what_torch_computes_past_the_tiled_kernels_rows(cuda):
    """More rows than the tiled kernels' grids hold: ModelNew reaches the naive kernel, never a
    refusal torch would not make."""
    M = 65535 * 128 + 7
    a = torch.randn(M, 4, device=cuda)
    b = torch.randn(4, 3, device=cuda)
    assert cupy_ops.gemm_plan(a, b, algo="accurate").family == "naive"
    torch.testing.assert_close(mm_model.ModelNew()(a, b), a @ b)


def test_the_custom_op_example_is_opcheck_and_gradcheck_clean_and_trains(cuda):
    """examples/custom_op.py, a user's fused op declared on the op layer: opcheck, gradcheck,
    forward AD and values against torch, then training under torch.compile and autocast."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "custom_op.py"
    spec = importlib.util.spec_from_file_location("custom_op_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.check(cuda)
    example.train(cuda, steps=20)


def test_fx_symbolic_trace_and_jit_trace_of_a_module_calling_the_builtins(cuda):
    """``torch.fx.symbolic_trace`` and ``torch.jit.trace`` of a module calling relu, relu_div, matmul and
    linear_relu_div (the public functions): the graph holds the registered ops and gives the
    eager module's values bit for bit (the functions once refused the trace's Proxy)."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(48, 32, device=cuda))
            self.b = torch.nn.Parameter(torch.randn(48, device=cuda))

        def forward(self, x):
            y = cupy_ops.relu_div(cupy_ops.matmul(x, self.w.t()), 2.0)
            return cupy_ops.relu(y) + cupy_ops.linear_relu_div(x, self.w, self.b, 3.0)

    m = M()
    gm = torch.fx.symbolic_trace(m)
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    assert {
        torch.ops.cupy_ops.matmul.default,
        torch.ops.cupy_ops.relu_div.default,
        torch.ops.cupy_ops.relu.default,
        torch.ops.cupy_ops.linear_relu_div.default,
    } <= targets, targets
    x = torch.randn(64, 32, device=cuda)
    with torch.no_grad():
        assert_bitwise_equal(gm(x), m(x))
        # torch.jit.trace records them too (it once raised from inside the launch)
        traced = torch.jit.trace(m, x)
        for name in ("matmul", "relu_div", "relu", "linear_relu_div"):
            assert f"cupy_ops::{name}" in str(traced.graph), traced.graph
        assert_bitwise_equal(traced(x), m(x))


def _negated_memory(t: torch.Tensor, dense: bool) -> torch.Tensor:
    """A tensor holding ``t``'s values whose memory holds their negation: torch's lazy
    negation, as ``z.conj().imag`` makes it (a view with gaps) or on a contiguous tensor
    (``dense``: the bit no copy resolves on its way to a kernel)."""
    x = torch._neg_view(-t) if dense else torch.complex(torch.zeros_like(t), -t).conj().imag
    assert x.is_neg() and x.is_contiguous() == dense
    return x


@pytest.mark.parametrize("dense", [True, False], ids=["contiguous", "z.conj().imag"])
def test_tensors_with_the_negative_bit_give_what_torch_gives(dense, cuda):
    """Every built-in reads a negated view as torch does (a kernel sees memory: the bit is
    resolved first), out of place, twice (the second call by signature), in place and out=
    (written through the bit), and under autograd."""
    g = torch.Generator(device=cuda).manual_seed(11)
    x, w, b = (torch.randn(*s, device=cuda, generator=g) for s in ((64, 48), (32, 48), (32,)))
    neg = [_negated_memory(t, dense) for t in (x, w, b)]
    for _ in range(2):
        assert_bitwise_equal(cupy_ops.relu(neg[0]), torch.relu(x))
        assert_bitwise_equal(cupy_ops.relu_div(neg[0], 2.0), torch.relu(x) / 2.0)
        assert_bitwise_equal(cupy_ops.matmul(neg[0], neg[1].t()), cupy_ops.matmul(x, w.t()))
        assert_bitwise_equal(cupy_ops.linear_relu_div(*neg, 3.0), cupy_ops.linear_relu_div(x, w, b, 3.0))
        assert_bitwise_equal(cupy_ops.linear(*neg), cupy_ops.linear(x, w, b))
    y = _negated_memory(x.clone(), dense)
    assert cupy_ops.relu_(y) is y and y.is_neg()
    assert_bitwise_equal(y.resolve_neg(), torch.relu(x))
    y = _negated_memory(x.clone(), dense)
    cupy_ops.relu_div_(y, 4.0)
    assert_bitwise_equal(y.resolve_neg(), torch.relu(x) / 4.0)
    out = _negated_memory(torch.zeros_like(x), dense)
    assert cupy_ops.relu(neg[0], out=out) is out and out.is_neg()
    assert_bitwise_equal(out.resolve_neg(), torch.relu(x))
    # a divisor tensor (its own fused path): negated itself, or dividing a negated x or out
    two = torch.tensor(2.0, device=cuda)
    for d in (_negated_memory(two.reshape(1), True).reshape(()), two, two.cpu()):
        assert_bitwise_equal(cupy_ops.relu_div(neg[0], d), torch.relu(x) / d)
        out = _negated_memory(torch.zeros_like(x), dense)
        cupy_ops.relu_div(neg[0], d, out=out)
        assert_bitwise_equal(out.resolve_neg(), torch.relu(x) / d)
        y = _negated_memory(x.clone(), dense)
        cupy_ops.relu_div_(y, d)
        assert_bitwise_equal(y.resolve_neg(), torch.relu(x) / d)

    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    ours = cupy_ops.linear_relu_div(*[_negated_memory(t, dense) for t in leaves], 3.0)
    ours.square().sum().backward()
    got = [t.grad for t in leaves]
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    cupy_ops.linear_relu_div(*leaves, 3.0).square().sum().backward()
    for a, e in zip(got, (t.grad for t in leaves)):
        assert_bitwise_equal(a, e)
