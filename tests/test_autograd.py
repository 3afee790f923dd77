"""Gradients: float64 gradcheck, float32 against torch's autograd, a training step of each
ModelNew next to Model."""
import pytest
import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.models import linear_relu_div, matmul, relu

pytestmark = pytest.mark.gpu


def away_from_zero(*shape, device):
    # ReLU has no derivative at 0: keep gradcheck's finite differences off the kink
    x = torch.randn(*shape, device=device, dtype=torch.float64)
    return (x + 0.1 * x.sign()).requires_grad_()


def test_gradcheck_relu(cuda):
    x = away_from_zero(7, 13, device=cuda)
    assert torch.autograd.gradcheck(cupy_ops.relu, (x,))
    assert torch.autograd.gradcheck(lambda t: cupy_ops.relu(t.t()), (x,))  # strided input


@pytest.mark.parametrize("divisor", [2.0, 3.0, -0.5])
def test_gradcheck_relu_div(divisor, cuda):
    x = away_from_zero(5, 33, device=cuda)
    assert torch.autograd.gradcheck(lambda t: cupy_ops.relu_div(t, divisor), (x,))


def test_gradcheck_matmul(cuda):
    a = torch.randn(6, 9, device=cuda, dtype=torch.float64, requires_grad=True)
    b = torch.randn(9, 5, device=cuda, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(cupy_ops.matmul, (a, b))
    assert torch.autograd.gradcheck(lambda p, q: cupy_ops.matmul(p.t(), q), (a.detach().t().contiguous().requires_grad_(), b))


@pytest.mark.parametrize("divisor", [2.0, -1.5])
def test_gradcheck_linear_relu_div(divisor, cuda):
    x = torch.randn(4, 6, device=cuda, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 6, device=cuda, dtype=torch.float64, requires_grad=True)
    b = (torch.randn(5, device=cuda, dtype=torch.float64) + 0.3).requires_grad_()
    fn = lambda x, w, b: cupy_ops.linear_relu_div(x, w, b, divisor)  # noqa: E731
    # nudge inputs until no pre-activation sits within finite-difference reach of the kink
    for _ in range(20):
        if (F.linear(x, w, b).abs() > 1e-3).all():
            break
        b.data += 0.01
    assert torch.autograd.gradcheck(fn, (x, w, b))
    assert torch.autograd.gradcheck(lambda x, w: cupy_ops.linear_relu_div(x, w, None, divisor), (x, w))


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 0)], ids=str)
def test_elementwise_grads_match_torch(dtype, tol, cuda):
    x = torch.randn(1024, 515, device=cuda, dtype=dtype)
    x[0, :4] = torch.tensor([0.0, -0.0, float("nan"), 1e-40])
    g = torch.randn_like(x)
    for ours, ref in [(cupy_ops.relu, torch.relu), (lambda t: cupy_ops.relu_div(t, 3.0), lambda t: torch.relu(t) / 3.0)]:
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        ours(a).backward(g)
        ref(b).backward(g)
        assert torch.equal(a.grad.isnan(), b.grad.isnan())
        torch.testing.assert_close(a.grad, b.grad, atol=tol, rtol=tol, equal_nan=True)


def test_linear_relu_div_grads_match_torch_fp32(cuda):
    torch.manual_seed(0)
    x = torch.randn(64, 256, device=cuda, requires_grad=True)
    w = (torch.randn(128, 256, device=cuda) / 16).requires_grad_()
    b = torch.randn(128, device=cuda, requires_grad=True)
    g = torch.randn(64, 128, device=cuda)
    cupy_ops.linear_relu_div(x, w, b, 2.0).backward(g)
    ours = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    (torch.relu(F.linear(x, w, b)) / 2.0).backward(g)
    for o, r in zip(ours, (x.grad, w.grad, b.grad)):
        torch.testing.assert_close(o, r, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("cls", [linear_relu_div.ModelNew, linear_relu_div.ModelNewNaive], ids=lambda c: c.__name__)
def test_training_step_matches_model(cls, cuda):
    init = [256, 128, 2.0]
    torch.manual_seed(42)
    ref = linear_relu_div.Model(*init).to(cuda)
    torch.manual_seed(42)
    new = cls(*init).to(cuda)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (ref, new)]
    torch.manual_seed(1)
    for step in range(3):
        x = torch.randn(32, 256, device=cuda)
        target = torch.randn(32, 128, device=cuda)
        losses = []
        for m, opt in zip((ref, new), opts):
            opt.zero_grad()
            loss = F.mse_loss(m(x), target)
            loss.backward()
            losses.append(loss.item())
            opt.step()
        assert abs(losses[0] - losses[1]) <= 1e-5 * abs(losses[0]), (step, losses)
    for p, q in zip(ref.parameters(), new.parameters()):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


def test_training_relu_and_matmul_models(cuda):
    x = torch.randn(64, 100, device=cuda, requires_grad=True)
    relu.ModelNew()(x).sum().backward()
    assert torch.equal(x.grad, (x > 0).float())
    a = torch.randn(16, 8, device=cuda, requires_grad=True)
    b = torch.randn(8, 4, device=cuda, requires_grad=True)
    matmul.ModelNew()(a, b).sum().backward()
    torch.testing.assert_close(a.grad, torch.ones(16, 4, device=cuda) @ b.t(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b.grad, a.t() @ torch.ones(16, 4, device=cuda), atol=1e-5, rtol=1e-5)


def test_inplace_on_tensor_requiring_grad_is_an_error(cuda):
    leaf = torch.randn(10, device=cuda, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad"):
        cupy_ops.relu_(leaf)
    with torch.no_grad():
        cupy_ops.relu_(leaf)
