"""The built-in ops as torch ops: opcheck, torch.compile(fullgraph=True), reduce-overhead (CUDA
graphs), manual graph capture; and plain eager calls that stay off the dispatcher."""

import pytest
import torch

import cupy_ops
from cupy_ops.models import linear_relu_div, relu

pytestmark = pytest.mark.gpu


def test_opcheck(cuda):
    x = torch.randn(33, 65, device=cuda, requires_grad=True)
    a = torch.randn(17, 9, device=cuda, requires_grad=True)
    b = torch.randn(9, 11, device=cuda, requires_grad=True)
    w = torch.randn(11, 9, device=cuda, requires_grad=True)
    bias = torch.randn(11, device=cuda, requires_grad=True)
    cases = [
        (torch.ops.cupy_ops.relu.default, (x,)),
        (torch.ops.cupy_ops.relu.default, (x.detach().t(),)),
        (torch.ops.cupy_ops.relu.default, (x.detach()[:, ::2],)),
        (torch.ops.cupy_ops.relu_div.default, (x, 2.0)),
        (torch.ops.cupy_ops.relu_backward.default, (x, x.detach(), 2.0)),
        (torch.ops.cupy_ops.relu_out.default, (torch.empty(33, 65, device=cuda), x.detach())),
        (torch.ops.cupy_ops.relu_div_out.default, (torch.empty(33, 65, device=cuda), x.detach(), 3.0)),
        (torch.ops.cupy_ops.matmul_out.default, (torch.empty(17, 11, device=cuda), a.detach(), b.detach(), "auto")),
        (torch.ops.cupy_ops.matmul.default, (a, b, "naive")),
        (torch.ops.cupy_ops.linear_relu_div.default, (a, w, bias, 2.0, "naive")),
        (torch.ops.cupy_ops.linear_relu_div.default, (a, w, None, 2.0, "naive")),
        (torch.ops.cupy_ops.matmul.default, (a, b, "auto")),
        (torch.ops.cupy_ops.linear_relu_div.default, (a, w, bias, 2.0, "auto")),
        (torch.ops.cupy_ops.linear_relu.default, (a, w, bias, "naive")),
        (torch.ops.cupy_ops.linear_relu.default, (a, w, None, "auto")),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


def _fresh(cls, init, cuda):
    torch.manual_seed(42)
    return cls(*init).to(cuda)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_compile_fullgraph_linear_relu_div(mode, cuda):
    init = [512, 256, 2.0]
    ref = _fresh(linear_relu_div.Model, init, cuda)
    for cls in (linear_relu_div.ModelNew, linear_relu_div.ModelNewNaive):
        torch._dynamo.reset()
        new = torch.compile(_fresh(cls, init, cuda), fullgraph=True, mode=mode)
        with torch.no_grad():
            for _ in range(3):  # reduce-overhead records the graph on a later call, then replays it
                x = torch.randn(64, 512, device=cuda)
                torch.testing.assert_close(new(x).clone(), ref(x), atol=1e-4, rtol=1e-4)


def test_compile_fullgraph_elementwise_and_training(cuda):
    torch._dynamo.reset()
    f = torch.compile(lambda t: cupy_ops.relu_div(cupy_ops.relu(t) * 3, 2.0), fullgraph=True)
    x = torch.randn(1000, device=cuda)
    assert torch.equal(f(x), torch.relu(torch.relu(x) * 3) / 2.0)
    torch._dynamo.reset()
    model = torch.compile(_fresh(linear_relu_div.ModelNew, [64, 32, 2.0], cuda), fullgraph=True)
    x = torch.randn(8, 64, device=cuda)
    model(x).sum().backward()
    assert model.linear.weight.grad is not None and model.linear.weight.grad.abs().sum() > 0


def test_manual_cuda_graph_capture(cuda):
    model = _fresh(linear_relu_div.ModelNew, [256, 128, 2.0], cuda)
    ref = _fresh(linear_relu_div.Model, [256, 128, 2.0], cuda)
    static_x = torch.randn(32, 256, device=cuda)
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm up (compiles the kernels) before capture
            for _ in range(2):
                model(static_x)
                cupy_ops.relu(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = model(static_x)
            static_r = cupy_ops.relu(static_x)
        for _ in range(3):
            static_x.copy_(torch.randn(32, 256, device=cuda))
            g.replay()
            torch.testing.assert_close(static_y, ref(static_x), atol=1e-4, rtol=1e-4)
            assert torch.equal(static_r, torch.relu(static_x))


def test_eager_calls_skip_the_dispatcher(cuda, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a plain eager call went through the custom op")

    for name in ("relu", "relu_div", "matmul", "linear_relu", "linear_relu_div"):
        declared = cupy_ops.Op.declared(f"cupy_ops::{name}")
        monkeypatch.setattr(declared, "overload", boom)
        monkeypatch.setattr(declared, "_eager_apply", boom)
    x = torch.randn(64, 64, device=cuda)
    w = torch.randn(32, 64, device=cuda, requires_grad=True)
    cupy_ops.relu(x)
    cupy_ops.relu_div(x, 2.0)
    cupy_ops.matmul(x, x)
    with torch.no_grad():
        cupy_ops.linear_relu_div(x, w, None, 2.0)  # weights require grad, but grad mode is off
        relu.ModelNew()(x)
