"""Prepacked weights (cupy_ops.prepack): a Linear weight's fp16x3 pieces kept across calls.
The values against float64 and against the unpacked call, every way a weight changes (each
must rebuild the pieces), CUDA graphs, autograd, modules, memory, and the argument errors."""

import gc

import pytest
import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.models import linear_relu_div
from cupy_ops.ops import gemm

from conftest import require_algo
from gemm_checks import assert_gemm_close, roundoff


def test_prepack_refuses_what_has_no_pieces():
    """Errors name the argument and what came: a non-tensor, a module without nn.Linear, a
    weight of another dtype, rank or device."""
    with pytest.raises(TypeError, match=r"obj must be an nn\.Module or a weight tensor, got list"):
        cupy_ops.prepack([torch.zeros(2, 2)])
    with pytest.raises(ValueError, match=r"obj has no nn\.Linear"):
        cupy_ops.prepack(torch.nn.ReLU())
    with pytest.raises(TypeError, match=r"prepack: weight must be float32 .*got torch.float16"):
        cupy_ops.prepack(torch.zeros(4, 4, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"prepack: weight must be 2-D .*got shape \(4,\)"):
        cupy_ops.prepack(torch.zeros(4))
    with pytest.raises(ValueError, match="weight must be a CUDA tensor, got a tensor on cpu"):
        cupy_ops.prepack(torch.nn.Linear(4, 4))
    with pytest.raises(TypeError, match=r"obj must be an nn\.Module or a weight tensor, got int"):
        cupy_ops.unprepack(3)
    assert cupy_ops.prepacked_bytes() == 0 and gemm.packed.lookup(torch.zeros(4, 4)) is None


def _weights(cuda, n, k, seed=0):
    g = torch.Generator(device=cuda).manual_seed(seed)
    return torch.randn(n, k, device=cuda, generator=g) / k**0.5, torch.randn(n, device=cuda, generator=g)


def _linear(x, w, b=None):
    return cupy_ops.linear(x, w, b, algo="fp16x3")


@pytest.fixture
def hopper(cuda):
    require_algo("fp16x3")
    yield cuda
    gemm.packed._entries.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("M, K, N", [(256, 512, 128), (64, 1024, 768), (3, 1001, 130), (1, 8, 1)])
def test_prepacked_values_are_the_unpacked_ones_within_the_bound(hopper, M, K, N):
    """A prepacked weight gives a @ b within fp16x3's rounding bound (odd K: the pieces' rows
    padded); where the unpacked call takes t from B too (M >= N), the same bits."""
    w, _ = _weights(hopper, N, K)
    x = torch.randn(M, K, device=hopper)
    plain = _linear(x, w)
    cupy_ops.prepack(w)
    got = _linear(x, w)
    assert cupy_ops.prepacked_bytes(w) >= 4 * N * K
    assert_gemm_close(got, x, w.t(), operand_roundoff=roundoff("fp16x3", torch.float32))
    if M >= N:
        assert torch.equal(got, plain)


@pytest.mark.gpu
def test_every_change_of_the_weight_rebuilds_its_pieces(hopper):
    """An optimizer step, load_state_dict, an in-place edit, a new .data (another storage), a
    move to another dtype: each call after one computes with the weight as it is then; an edit
    through .data (no version bump) after prepack is called again."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128).to(hopper)
    x = torch.randn(300, 256, device=hopper)
    cupy_ops.prepack(lin)

    def check():
        got = cupy_ops.linear(x, lin.weight, lin.bias, algo="fp16x3")
        cupy_ops.unprepack(lin)
        expect = cupy_ops.linear(x, lin.weight, lin.bias, algo="fp16x3")
        cupy_ops.prepack(lin)
        assert torch.equal(got, expect)

    check()
    opt = torch.optim.SGD(lin.parameters(), lr=0.5)
    cupy_ops.linear(x, lin.weight, lin.bias, algo="fp16x3").sum().backward()
    opt.step()
    check()
    lin.load_state_dict(torch.nn.Linear(256, 128).to(hopper).state_dict())
    check()
    with torch.no_grad():
        lin.weight.mul_(-3)
    check()
    lin.weight.data = torch.randn(128, 256, device=hopper)
    check()
    before = cupy_ops.linear(x, lin.weight, lin.bias, algo="fp16x3")
    lin.weight.data.add_(1.0)  # bumps no version counter: the stale pieces, until prepack again
    assert torch.equal(cupy_ops.linear(x, lin.weight, lin.bias, algo="fp16x3"), before)
    cupy_ops.prepack(lin)
    assert not torch.equal(cupy_ops.linear(x, lin.weight, lin.bias, algo="fp16x3"), before)
    check()


@pytest.mark.gpu
def test_memory_is_given_back(hopper):
    """prepacked_bytes counts built pieces only; unprepack and the weight's end free them."""
    w, _ = _weights(hopper, 512, 256)
    x = torch.randn(600, 256, device=hopper)
    cupy_ops.prepack(w)
    assert cupy_ops.prepacked_bytes() == 0  # built by the first call
    _linear(x, w)
    assert cupy_ops.prepacked_bytes(w) == cupy_ops.prepacked_bytes() >= 512 * 256 * 4
    cupy_ops.unprepack(w)
    assert cupy_ops.prepacked_bytes() == 0 and gemm.packed.lookup(w) is None
    cupy_ops.prepack(w)
    _linear(x, w)
    del w
    gc.collect()
    assert not gemm.packed._entries


@pytest.mark.gpu
def test_pieces_built_on_one_stream_are_read_safely_on_another(hopper):
    """The first use builds the pieces on its stream (queued behind a sleep there); a call on
    another stream gives the unpacked call's bits and is recorded as having waited for the
    build. (Without the wait this test still passed on an H200: something on the call path
    orders the two streams; the wait is what CUDA's stream semantics ask for.)"""
    w, b = _weights(hopper, 1024, 2048)
    x = torch.randn(1536, 2048, device=hopper)  # M >= N: the unpacked call's bits
    expect = _linear(x, w, b)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):  # the side stream's memory pool warm: no cudaMalloc (a sync) below
        for _ in range(2):
            cupy_ops.prepack(w)
            _linear(x, w, b)
            cupy_ops.unprepack(w)
    cupy_ops.prepack(w)
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)  # the build below is queued behind ~tens of ms on this stream
    _linear(x[:1], w, b)  # builds the pieces on the default stream
    with torch.cuda.stream(side):
        got = _linear(x, w, b)  # must wait for the build
        entry = gemm.packed.lookup(w)
        assert side.cuda_stream in entry.streams
    torch.cuda.synchronize()
    assert torch.equal(got, expect)
    cupy_ops.prepack(w)  # forgets the pieces: their memory goes back once the side stream's work is done
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_a_graph_replay_reads_the_weight_as_it_is_then(hopper):
    """Under CUDA graph capture the call reads the weight (no pieces captured at an old
    version): an in-place edit between replays shows in the next replay."""
    w, b = _weights(hopper, 128, 256)
    x = torch.randn(256, 256, device=hopper)
    cupy_ops.prepack(w)
    _linear(x, w, b)  # pieces built outside the graph
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _linear(x, w, b)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = _linear(x, w, b)
    with torch.no_grad():
        w.mul_(2)
    g.replay()
    torch.cuda.synchronize()
    cupy_ops.unprepack(w)
    assert torch.equal(y, _linear(x, w, b))


@pytest.mark.gpu
def test_prepacked_layers_train_and_fold_as_unpacked(hopper):
    """linear_relu_div over x (batch, M, K), a user epilogue, and autograd: forward values as the
    unpacked call's where both take t from B, gradients equal (they read the weight)."""
    torch.manual_seed(1)
    w = torch.randn(64, 96, device=hopper, requires_grad=True)
    bias = torch.randn(64, device=hopper)
    x = torch.randn(2, 70, 96, device=hopper, requires_grad=True)
    leaky = cupy_ops.epilogue(
        "__device__ acc_t apply(acc_t v, acc_t s) { return v > 0 ? v : v * s; }",
        scalars=("s",),
        derivative="__device__ acc_t grad(acc_t v, acc_t s) { return v > 0 ? acc_t(1) : s; }",
        name="leaky_packed",
    )
    runs = []
    for packed in (False, True):
        if packed:
            cupy_ops.prepack(w)
        y1 = cupy_ops.linear_relu_div(x, w, bias, 2.0, algo="fp16x3")
        y2 = cupy_ops.linear(x, w, bias, epilogue=leaky, s=0.1, algo="fp16x3")
        gx, gw = torch.autograd.grad((y1.sum() + y2.square().sum()), (x, w))
        runs.append((y1, y2, gx, gw))
    assert cupy_ops.prepacked_bytes(w) > 0
    for a, b in zip(*runs):
        assert torch.equal(a, b)


@pytest.mark.gpu
def test_a_prepacked_model_passes_kernelbench_check(hopper):
    """level2/63's ModelNew, prepacked (off by default), where "accurate" takes fp16x3 over the
    pieces and tf32x3 without them (as ``gemm_plan`` of the layer says): within KernelBench's
    tolerance of Model, and its error against float64 at most torch fp32's."""
    torch.manual_seed(0)
    model = linear_relu_div.ModelNew(4096, 4096, 2.0).to(hopper)
    x = torch.rand(256, 4096, device=hopper)
    wt = model.linear.weight.t()
    assert gemm.plan_for(x, wt, "EpiBiasReluScale", "accurate").family == "tf32x3"
    assert gemm.plan_for(x, wt, "EpiBiasReluScale", "accurate", b_packed=True).b.prep == "prepacked"
    assert cupy_ops.prepacked_bytes(model) == 0
    assert cupy_ops.gemm_plan(x, wt, algo="accurate", bias_relu_scale=True).family == "tf32x3"
    cupy_ops.prepack(model)
    # gemm_plan of the layer shows the plan over the pieces; matmul(x, w.T) never reads them
    assert cupy_ops.gemm_plan(x, wt, algo="accurate", bias_relu_scale=True).b.prep == "prepacked"
    assert cupy_ops.gemm_plan(x, wt, algo="accurate").family == "tf32x3"
    with torch.no_grad():
        got = model(x)
        ref = linear_relu_div.Model.forward(model, x)
        exact = torch.relu(F.linear(x.double(), model.linear.weight.double(), model.linear.bias.double())) / 2
    assert cupy_ops.prepacked_bytes(model) > 0
    torch.testing.assert_close(got, ref, atol=1e-2, rtol=1e-2)
    assert (got.double() - exact).abs().max() <= (ref.double() - exact).abs().max()
