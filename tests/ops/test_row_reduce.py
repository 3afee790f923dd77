"""row_reduce (ops/row_reduce.py) and linear(..., reduce=): side by side with torch's sum, mean,
amax, amin, logsumexp and softmax over the last dimension (values against float64 at torch's
error order, amax / amin bit for bit; NaN, infinities, empty rows; autograd, compile, autocast)."""

import importlib

import pytest
import torch
import torch.nn.functional as F

import cupy_ops

from conftest import ALL_DTYPES, OnDevice, assert_of_torchs_error_order, special_values

rr = importlib.import_module("cupy_ops.ops.row_reduce")
HOWS = list(rr.REDUCTIONS)
TORCH = {
    "sum": lambda x: x.sum(-1),
    "mean": lambda x: x.mean(-1),
    "amax": lambda x: x.amax(-1),
    "amin": lambda x: x.amin(-1),
    "logsumexp": lambda x: x.logsumexp(-1),
    "softmax": lambda x: x.softmax(-1),
}
# rows of 1 to past a block's worth of warps, 3-D and 1-D inputs
SHAPES = [(1, 1), (3, 1), (7, 31), (5, 32), (4, 33), (129, 1000), (2, 1024), (3, 1025), (16, 8192), (2, 3, 77)]
SHAPES += [(20000,)]


# --- CPU --------------------------------------------------------------------------------------


def test_unknown_reductions_and_cpu_tensors_are_refused_by_name():
    with pytest.raises(ValueError, match="how must be one of sum, mean, amax, amin, logsumexp, softmax, got 'max'"):
        cupy_ops.row_reduce(torch.zeros(3), "max")
    with pytest.raises(TypeError, match="how must be a str"):
        cupy_ops.row_reduce(torch.zeros(3), 0)
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):
        cupy_ops.row_reduce(torch.zeros(3), "softmax")
    with pytest.raises(ValueError, match="reduce must be None or one of"):
        cupy_ops.linear(torch.zeros(2, 3), torch.zeros(4, 3), reduce="max")


def test_rows_past_the_kernels_int_are_refused_by_name():
    """A row of 2^31 elements (an expanded view, no memory; a CPU tensor that says it is on
    cuda:0) is a ValueError from the output rule, before any launch: the kernel's n is an int."""
    x = torch.zeros(1).expand(2**31).as_subclass(OnDevice)
    for how in HOWS:
        with pytest.raises(ValueError, match=f"row_{how}: rows of at most 2147483647 elements, got 2147483648"):
            rr.OPS[how].output(x)


def test_a_row_takes_one_warp_per_thousand_columns_up_to_a_block():
    assert [rr.threads_for(n) for n in (1, 1024, 1025, 4096, 8192, 10**6)] == [32, 32, 64, 128, 256, 256]
    assert "reduce" in cupy_ops.ops.gemm.epilogues.RESERVED  # linear's own keyword


# --- GPU --------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["sum", "mean", "softmax"])
def test_float32_rows_summed_in_float64_err_no_more_than_torch(how, cuda):
    """float32 rows are summed in float64 and rounded once: the largest error against float64 is
    at most torch's (summed in float32: softmax 1.1-1.7x torch's at these shapes, sum and mean up
    to 1.7x; H200)."""
    for shape in [(1024, 8192), (4096, 4096), (512, 32768)]:
        torch.manual_seed(0)
        x = torch.randn(*shape, device=cuda) * 3
        exact = TORCH[how](x.double())
        ours = (cupy_ops.row_reduce(x, how).double() - exact).abs().max().item()
        torchs = (TORCH[how](x).double() - exact).abs().max().item()
        assert ours <= torchs, (how, shape, ours, torchs)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("how", HOWS)
def test_values_are_torchs_within_its_error_order(how, dtype, cuda):
    torch.manual_seed(0)
    for shape in SHAPES:
        x = (torch.randn(shape, device=cuda) * 3).to(dtype)
        got, want = cupy_ops.row_reduce(x, how), TORCH[how](x)
        assert got.shape == want.shape and got.dtype == want.dtype, (how, shape)
        if how in ("amax", "amin"):
            assert torch.equal(got, want), (how, shape)
        else:
            assert_of_torchs_error_order(got, want, TORCH[how](x.double()), f"{how} {shape} {dtype}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("how", HOWS)
def test_nan_infinities_zeros_and_denormals_give_torchs_results(how, dtype, cuda):
    """Rows of special values (each row a different mix: with NaN, with +inf, only -inf, only
    zeros of both signs, denormals): NaN and infinities where torch has them, the rest close;
    amax / amin bit for bit (a denormal maximum included: the kernel compares bits, not floats
    flushed to zero)."""
    vals = special_values(dtype, cuda)
    g = torch.Generator(device=cuda).manual_seed(1)
    rows = [vals[torch.randperm(vals.numel(), device=cuda, generator=g)] for _ in range(6)]
    ninf, zero, tiny = float("-inf"), 0.0, torch.finfo(dtype).tiny
    rows += [
        torch.full_like(vals, ninf),
        torch.tensor([zero, -zero] * (vals.numel() // 2), dtype=dtype, device=cuda),
        (torch.arange(vals.numel(), device=cuda, dtype=torch.float64) * tiny / 64 - tiny / 4).to(dtype),
        torch.where(vals.isnan(), torch.zeros_like(vals), vals),  # no NaN: +-inf and the rest
    ]
    x = torch.stack(rows)
    got, want = cupy_ops.row_reduce(x, how), TORCH[how](x)
    assert torch.equal(got.isnan(), want.isnan()), (how, got, want)
    assert torch.equal(got.isinf() & (got > 0), want.isinf() & (want > 0)), (how, got, want)
    assert torch.equal(got.isinf() & (got < 0), want.isinf() & (want < 0)), (how, got, want)
    if how in ("amax", "amin"):
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    else:
        finite = want.isfinite()
        exact = TORCH[how](x.double())
        assert_of_torchs_error_order(got[finite], want[finite], exact[finite], f"{how} special")


@pytest.mark.gpu
@pytest.mark.parametrize("how", HOWS)
def test_empty_rows_layouts_and_zero_dim_inputs_as_torch(how, cuda):
    for x in (torch.empty(3, 0, device=cuda), torch.empty(0, 5, device=cuda), torch.tensor(2.5, device=cuda)):
        try:
            want = TORCH[how](x)
        except IndexError as e:  # amax / amin of rows of no element
            with pytest.raises(IndexError, match=str(e).split(":")[0]):
                cupy_ops.row_reduce(x, how)
            continue
        got = cupy_ops.row_reduce(x, how)
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    x = torch.randn(40, 70, device=cuda)
    for v in (x.t(), x[:, ::3], x.view(5, 8, 70).permute(1, 2, 0)):
        assert_of_torchs_error_order(cupy_ops.row_reduce(v, how), TORCH[how](v), TORCH[how](v.double()), how)


@pytest.mark.gpu
@pytest.mark.parametrize("how", HOWS)
def test_gradients_of_both_modes_and_second_order_as_torchs(how, cuda):
    torch.manual_seed(0)
    x = torch.randn(5, 7, device=cuda, dtype=torch.float64, requires_grad=True)
    f = lambda t: cupy_ops.row_reduce(t, how)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    assert torch.autograd.gradcheck(f, (x,), check_forward_ad=True, check_backward_ad=False, check_undefined_grad=False)
    # ties share the gradient of amax / amin evenly, as torch's do
    t = torch.tensor([[1.0, 3.0, 3.0, -2.0], [-2.0, 0.5, -2.0, -2.0]], device=cuda, requires_grad=True)
    g = torch.tensor([1.0, 2.0], device=cuda) if how != "softmax" else torch.randn(2, 4, device=cuda)
    (ours,) = torch.autograd.grad(cupy_ops.row_reduce(t, how), t, g)
    (theirs,) = torch.autograd.grad(TORCH[how](t), t, g)
    torch.testing.assert_close(ours, theirs)


@pytest.mark.gpu
def test_compile_fullgraph_autocast_and_vmap_as_torch(cuda):
    torch.manual_seed(0)
    x = torch.randn(33, 500, device=cuda)
    xb = x.bfloat16()
    for how in HOWS:
        f = torch.compile(lambda t, how=how: cupy_ops.row_reduce(t, how), fullgraph=True)
        torch.testing.assert_close(f(x), cupy_ops.row_reduce(x, how), rtol=0, atol=0)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            got, want = cupy_ops.row_reduce(xb, how), TORCH[how](xb)
        assert got.dtype == want.dtype, how  # softmax, sum, logsumexp in float32, as torch's
        torch.testing.assert_close(got, want, rtol=2e-2, atol=1e-2)
        v = torch.func.vmap(lambda t, how=how: cupy_ops.row_reduce(t, how), in_dims=1)(x.view(33, 5, 100))
        assert_of_torchs_error_order(v, TORCH[how](x.view(33, 5, 100).transpose(0, 1)), TORCH[how](
            x.double().view(33, 5, 100).transpose(0, 1)), how)  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize("how", HOWS)
def test_linear_with_reduce_is_the_reduction_of_its_output(how, cuda):
    """``linear(..., epilogue=e, reduce=how)`` is ``row_reduce`` of ``linear(..., epilogue=e)``,
    its gradients torch's chain rule through both (float64 gradcheck, no epilogue); KernelBench
    99's GELU-then-softmax and 45's logsumexp shapes of it against torch's modules."""
    torch.manual_seed(0)
    x, w, b = torch.randn(64, 96, device=cuda), torch.randn(80, 96, device=cuda) / 10, torch.randn(80, device=cuda)
    gelu = cupy_ops.epilogue(
        "__device__ acc_t apply(acc_t v) {"
        " return v * acc_t(0.5) * (acc_t(1) + erf(v * acc_t(0.70710678118654752440))); }",
        name="gelu_for_reduce",
    )
    y = cupy_ops.linear(x, w, b, epilogue=gelu)
    torch.testing.assert_close(
        cupy_ops.linear(x, w, b, epilogue=gelu, reduce=how), cupy_ops.row_reduce(y, how), rtol=0, atol=0
    )
    exact = TORCH[how](F.gelu(F.linear(x.double(), w.double(), b.double())))
    assert_of_torchs_error_order(
        cupy_ops.linear(x, w, b, epilogue=gelu, reduce=how), TORCH[how](F.gelu(F.linear(x, w, b))), exact, how
    )
    xd, wd, bd = (t.double().requires_grad_() for t in (x[:6, :9], w[:5, :9], b[:5]))
    assert torch.autograd.gradcheck(lambda *a: cupy_ops.linear(*a, reduce=how), (xd, wd, bd))
    f = torch.compile(lambda t: cupy_ops.linear(t, w, b, epilogue=gelu, reduce=how), fullgraph=True)
    torch.testing.assert_close(f(x), cupy_ops.linear(x, w, b, epilogue=gelu, reduce=how), rtol=0, atol=0)
