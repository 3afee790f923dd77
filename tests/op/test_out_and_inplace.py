"""In-place and out=: each behaviour side by side with torch's own (torch.clamp_min(x, 0, out=)
is torch's relu with an out= form; x.div_(d) its in-place divide)."""

import warnings

import pytest
import torch

import cupy_ops

from conftest import HOPPER, assert_bitwise_equal

pytestmark = pytest.mark.gpu
PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single memory location"
REPEATED = "more than one element of the written-to tensor refers to a single memory location"
NO_AUTOGRAD = r"functions with out=\.\.\. arguments don't support automatic differentiation"


def raises_like_torch(match, ours, theirs):
    with pytest.raises(RuntimeError, match=match):
        theirs()
    with pytest.raises(RuntimeError, match=match):
        ours()


@pytest.mark.parametrize("inplace", ["relu_", "relu_div_", "relu out=", "relu_div out="])
def test_an_inplace_write_bumps_the_version_counter(inplace, cuda):
    """Autograd saved w for x's gradient; overwriting w in place must make backward refuse,
    as it does after torch's own in-place ops."""
    x = torch.randn(1000, device=cuda, requires_grad=True)
    w = torch.randn(1000, device=cuda)
    write = {
        "relu_": lambda: cupy_ops.relu_(w),
        "relu_div_": lambda: cupy_ops.relu_div_(w, 2.0),
        "relu out=": lambda: cupy_ops.relu(w.detach().clone(), out=w),
        "relu_div out=": lambda: cupy_ops.relu_div(w.detach().clone(), 3.0, out=w),
    }[inplace]
    torch_y = (x * w).sum()
    w.relu_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch_y.backward()
    y = (x * w).sum()
    before = w._version
    write()
    assert w._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_out_partially_overlapping_the_input_is_refused(cuda):
    buf = torch.randn(1 << 20, device=cuda)
    raises_like_torch(
        PARTIAL, lambda: cupy_ops.relu(buf[:-1], out=buf[1:]), lambda: torch.clamp_min(buf[:-1], 0, out=buf[1:])
    )
    raises_like_torch(
        PARTIAL, lambda: cupy_ops.relu_div(buf[:-1], 2.0, out=buf[1:]), lambda: torch.div(buf[:-1], 2.0, out=buf[1:])
    )
    # full overlap (the same elements, the same order) is in place, as for torch
    expected = torch.relu(buf)
    assert cupy_ops.relu(buf, out=buf.view(-1)) is not None
    assert_bitwise_equal(buf, expected)


def test_out_with_repeated_elements_is_refused(cuda):
    x = torch.randn(64, device=cuda)
    out = torch.empty(1, device=cuda).expand(64)
    raises_like_torch(REPEATED, lambda: cupy_ops.relu(x, out=out), lambda: torch.clamp_min(x, 0, out=out))


def test_a_gpu_divisor_inside_x_in_place_is_refused_as_torch_refuses_it(cuda):
    x = torch.randn(1 << 24, device=cuda)
    t = x.clone()
    raises_like_torch(PARTIAL, lambda: cupy_ops.relu_div_(x, x[0]), lambda: t.div_(t[0]))
    # out of place it is read, not written: exact, as torch
    assert_bitwise_equal(cupy_ops.relu_div(x, x[5]), torch.relu(x) / x[5])


def test_out_with_an_input_that_requires_grad_is_refused(cuda):
    x = torch.randn(100, device=cuda, requires_grad=True)
    y = torch.empty(100, device=cuda)
    raises_like_torch(NO_AUTOGRAD, lambda: cupy_ops.relu(x, out=y), lambda: torch.clamp_min(x, 0, out=y))
    raises_like_torch(NO_AUTOGRAD, lambda: cupy_ops.relu_div(x, 2.0, out=y), lambda: torch.div(x, 2.0, out=y))
    with torch.no_grad():
        cupy_ops.relu(x, out=y)
    assert_bitwise_equal(y, torch.relu(x.detach()))


def test_inplace_on_a_leaf_that_requires_grad_is_refused_with_torchs_message(cuda):
    leaf = torch.randn(10, device=cuda, requires_grad=True)
    raises_like_torch(
        "a leaf Variable that requires grad is being used in an in-place operation",
        lambda: cupy_ops.relu_(leaf),
        lambda: torch.relu_(leaf),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_matmul_and_the_layer_written_over_their_own_input_give_the_product(dtype, cuda):
    """The GEMM ops' out= (the Op's ``out=``, ``torch.ops.cupy_ops.*_out``) and an ``out`` that is
    one of their inputs: the product bit for bit as the functional call gives it. torch's mm out=
    over an input gives other values once the GEMM spans several tiles (pytorch#13892); a GEMM
    cannot run over its own input, so the op computes aside and copies."""
    MATMUL = cupy_ops.Op.declared("cupy_ops::matmul")
    LINEAR_RELU_DIV = cupy_ops.Op.declared("cupy_ops::linear_relu_div")

    torch.manual_seed(0)
    for shape in ((384, 384), (3, 192, 192)):
        a, b = torch.randn(shape, device=cuda, dtype=dtype), torch.randn(shape, device=cuda, dtype=dtype)
        want = cupy_ops.matmul(a, b)
        for target in (0, 1):
            x, y = a.clone(), b.clone()
            out = (x, y)[target]
            assert MATMUL(x, y, out=out) is out
            assert_bitwise_equal(out, want)
            x, y = a.clone(), b.clone()
            out = (x, y)[target]
            torch.ops.cupy_ops.matmul_out(out, x, y, "auto")
            assert_bitwise_equal(out, want)
        x = a.clone()
        torch.ops.cupy_ops.matmul_out(x, x, x, "auto")
        assert_bitwise_equal(x, cupy_ops.matmul(a, a))
    x, w, bias = (
        torch.randn(256, 256, device=cuda, dtype=dtype),
        torch.randn(256, 256, device=cuda, dtype=dtype),
        torch.randn(256, device=cuda, dtype=dtype),
    )
    want = cupy_ops.linear_relu_div(x, w, bias, 2.0)
    for target in ("x", "weight"):
        xx, ww = x.clone(), w.clone()
        out = xx if target == "x" else ww
        assert LINEAR_RELU_DIV(xx, ww, bias, 2.0, out=out) is out
        assert_bitwise_equal(out, want)


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((3, 17, 9), (3, 9, 11)),
        ((2, 1, 17, 9), (3, 9, 11)),
        ((4, 17, 9), (9, 11)),
        ((17, 9), (4, 9, 11)),
        ((9,), (4, 9, 11)),
        ((3, 17, 9), (9,)),
        ((9,), (9,)),
    ],
)
def test_matmul_out_takes_torchs_shapes_as_torch_matmul_out_does(sa, sb, cuda):
    """matmul's out= over torch.matmul's batched, broadcast and 1-D shapes, side by side with
    torch.matmul(out=): an empty ``out``, one of another shape (resized, warned as torch warns),
    one of the right shape but other strides; torch's shape, our functional call's values bit
    for bit. Where torch raises (2.11: its folded path, a batched ``a`` with a 2-D or 1-D ``b``,
    with the strided ``out``: "The size of tensor a (17) must match the size of tensor b (68)")
    ours still writes the product."""
    MATMUL = cupy_ops.Op.declared("cupy_ops::matmul")

    torch.manual_seed(1)
    a, b = torch.randn(sa, device=cuda), torch.randn(sb, device=cuda)
    want, ref = cupy_ops.matmul(a, b), torch.matmul(a, b)
    outs = [("empty", lambda: torch.empty(0, device=cuda)), ("wrong", lambda: torch.empty(5, device=cuda))]
    if ref.dim() >= 2:
        back = tuple(range(ref.dim() - 1, -1, -1))  # the right shape, the strides reversed
        outs.append(("strided", lambda: torch.empty(ref.shape[::-1], device=cuda).permute(*back)))
    for name, make in outs:
        ours, theirs = make(), make()
        with warnings.catch_warnings(record=True) as seen_ours:
            warnings.simplefilter("always")
            assert MATMUL(a, b, out=ours) is ours
        with warnings.catch_warnings(record=True) as seen_theirs:
            warnings.simplefilter("always")
            try:
                torch.matmul(a, b, out=theirs)
            except RuntimeError as exc:  # its copy back from a reshaped copy of out, not out's shape
                assert name == "strided" and a.dim() > 2 and b.dim() <= 2, (name, exc)
                theirs = None
        if theirs is not None:
            resized = [sum("was resized" in str(w.message) for w in seen) for seen in (seen_ours, seen_theirs)]
            assert resized[0] == resized[1], (name, resized)
            assert theirs.shape == ref.shape, name
        assert ours.shape == ref.shape, name
        assert_bitwise_equal(ours.contiguous(), want)


_SCALE_INPLACE = r"""
template <class T>
__global__ void scale_into(const T* x, T* y, float s, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_float<T>(to_float(x[i]) * s);
}"""


@pytest.mark.parametrize("policy", ["lower", "fp32", "promote"])
@pytest.mark.parametrize("compiled", [False, True])
def test_out_and_in_place_under_autocast_compute_in_the_dtypes_given_as_torchs_do(policy, compiled, cuda):
    """torch autocasts out-of-place calls only: ``torch.mm(a, b, out=o)`` and ``o.addmm_(a, b)``
    under autocast compute in float32, as outside it. A declared op's out= and in-place forms
    (and matmul's out=) do the same, eagerly and compiled: ``x`` itself is written, keeps its
    dtype and gets the values of the call outside autocast (an in-place call once returned a new
    bfloat16 tensor and left ``x`` unchanged)."""
    torch.manual_seed(0)
    a, b = torch.randn(64, 48, device=cuda), torch.randn(48, 32, device=cuda)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        o = torch.empty(64, 32, device=cuda)
        torch.mm(a, b, out=o)
        acc = torch.zeros(64, 32, device=cuda).addmm_(a, b)
    assert o.dtype == acc.dtype == torch.float32
    assert_bitwise_equal(o, torch.mm(a, b))
    assert_bitwise_equal(acc, torch.zeros(64, 32, device=cuda).addmm_(a, b))

    kernel = cupy_ops.Kernel(_SCALE_INPLACE, "scale_into")

    @cupy_ops.op(
        f"test_autocast_inplace::scale_{policy}_{int(compiled)}",
        output=cupy_ops.like("x"),
        inplace="x",
        autocast=policy,
    )
    def scale(x: torch.Tensor, s: float, *, out: torch.Tensor) -> None:
        kernel(x, out, s, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)

    x0 = torch.randn(1000, device=cuda)
    want = scale(x0, 3.0)
    matmul_want = cupy_ops.matmul(a, b)

    def calls(x, out, m):
        scale.call_inplace((x, 3.0))
        scale(x0, 3.0, out=out)
        torch.ops.cupy_ops.matmul_out(m, a, b, "auto")
        return x, out, m

    run = torch.compile(calls, fullgraph=True) if compiled else calls
    x, out, m = x0.clone(), torch.empty(1000, device=cuda), torch.empty(64, 32, device=cuda)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got = run(x, out, m)
    assert got[0] is x or compiled
    for t, w in ((x, want), (out, want), (m, matmul_want)):
        assert t.dtype == torch.float32
        assert_bitwise_equal(t, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_a_gemm_out_off_16_bytes_gets_what_a_fresh_output_gets(dtype, cuda):
    """``out=`` a contiguous view off 16 bytes (``buf[1:]``) for every GEMM family: the values of
    a fresh output, no misaligned store (a fault that would end the process's CUDA context)."""
    matmul = cupy_ops.Op.declared("cupy_ops::matmul")
    g = torch.Generator(device=cuda).manual_seed(2)
    a, b = (torch.randn(*s, device=cuda, generator=g).to(dtype) for s in ((96, 64), (64, 128)))
    algos = ["auto", "accurate", "naive"] + (["wgmma"] if HOPPER else [])
    if dtype == torch.float32:
        algos += ["simt"] + (["tf32x3", "fp16x3"] if HOPPER else [])
    for algo in algos:
        buf = torch.zeros(96 * 128 + 1, device=cuda, dtype=dtype)
        out = buf[1:].view(96, 128)
        assert out.data_ptr() % 16
        assert matmul(a, b, algo, out=out) is out
        torch.ops.cupy_ops.matmul_out(out, a, b, algo)
        assert_bitwise_equal(out, cupy_ops.matmul(a, b, algo=algo))
    w, bias = b.t().contiguous(), torch.randn(128, device=cuda, generator=g).to(dtype)
    layer = cupy_ops.Op.declared("cupy_ops::linear_relu_div")
    out = torch.zeros(96 * 128 + 1, device=cuda, dtype=dtype)[1:].view(96, 128)
    assert layer(a, w, bias, 3.0, "auto", out=out) is out
    assert_bitwise_equal(out, cupy_ops.linear_relu_div(a, w, bias, 3.0))
    torch.cuda.synchronize()
