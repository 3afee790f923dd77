"""Gradients: float64 gradcheck and gradgradcheck, gradients side by side with torch's autograd
(the ReLU mask, divisor tensors, in-place calls torch records), a training step of each
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
    assert torch.autograd.gradcheck(
        lambda p, q: cupy_ops.matmul(p.t(), q), (a.detach().t().contiguous().requires_grad_(), b)
    )


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
    for ours, ref in [
        (cupy_ops.relu, torch.relu),
        (lambda t: cupy_ops.relu_div(t, 3.0), lambda t: torch.relu(t) / 3.0),
    ]:
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


# --- second order: every formula is built of differentiable ops --------------------------


def test_gradgradcheck_relu(cuda):
    x = away_from_zero(7, 13, device=cuda)
    assert torch.autograd.gradgradcheck(cupy_ops.relu, (x,))
    assert torch.autograd.gradgradcheck(lambda t: cupy_ops.relu(t.t()), (x,))


@pytest.mark.parametrize("divisor", [2.0, -0.5])
def test_gradgradcheck_relu_div(divisor, cuda):
    x = away_from_zero(5, 33, device=cuda)
    assert torch.autograd.gradgradcheck(lambda t: cupy_ops.relu_div(t, divisor), (x,))


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_gradgradcheck_relu_div_tensor_divisor(where, cuda):
    x = away_from_zero(5, 33, device=cuda)
    d = torch.tensor(1.7, dtype=torch.float64, device=cuda if where == "cuda" else "cpu", requires_grad=True)
    assert torch.autograd.gradcheck(cupy_ops.relu_div, (x, d))
    assert torch.autograd.gradgradcheck(cupy_ops.relu_div, (x, d))


def test_gradgradcheck_matmul(cuda):
    a = torch.randn(6, 9, device=cuda, dtype=torch.float64, requires_grad=True)
    b = torch.randn(9, 5, device=cuda, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(cupy_ops.matmul, (a, b))


@pytest.mark.parametrize("algo", ["auto", "naive"])
def test_gradgradcheck_linear_relu_div(algo, cuda):
    x = torch.randn(4, 6, device=cuda, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 6, device=cuda, dtype=torch.float64, requires_grad=True)
    b = (torch.randn(5, device=cuda, dtype=torch.float64) + 0.3).requires_grad_()
    for _ in range(20):
        if (F.linear(x, w, b).abs() > 1e-3).all():
            break
        b.data += 0.01
    fn = lambda x, w, b: cupy_ops.linear_relu_div(x, w, b, -1.5, algo=algo)  # noqa: E731
    assert torch.autograd.gradgradcheck(fn, (x, w, b))
    # the custom op called directly (its own backward recomputes the pre-activation)
    op = lambda x, w, b: torch.ops.cupy_ops.linear_relu_div(x, w, b, 2.0, algo)  # noqa: E731
    assert torch.autograd.gradcheck(op, (x, w, b))
    assert torch.autograd.gradgradcheck(op, (x, w, b))


def test_hessian_vector_product_matches_torch(cuda):
    torch.manual_seed(3)
    x = torch.randn(16, 32, device=cuda, dtype=torch.float64, requires_grad=True)
    w = torch.randn(24, 32, device=cuda, dtype=torch.float64)
    v = torch.randn_like(x)

    def hvp(f):
        (g,) = torch.autograd.grad((f(x) ** 2).sum(), x, create_graph=True)
        (h,) = torch.autograd.grad((g * v).sum(), x)
        return h

    ours = hvp(lambda t: cupy_ops.linear_relu_div(t, w, None, 3.0))
    ref = hvp(lambda t: torch.relu(F.linear(t, w)) / 3.0)
    torch.testing.assert_close(ours, ref, atol=1e-10, rtol=1e-10)


# --- linear_relu_div: the ReLU mask comes from the pre-activation, as in torch -----------


def test_linear_relu_div_mask_survives_an_output_rounded_to_zero(cuda):
    # fp16: z = 2**-24 > 0, but relu(z) / 2 rounds to 0; torch still passes the gradient
    results = []
    for f in (lambda x, w: cupy_ops.linear_relu_div(x, w, None, 2.0), lambda x, w: torch.relu(F.linear(x, w)) / 2.0):
        x = torch.ones(1, 1, device=cuda, dtype=torch.float16, requires_grad=True)
        w = torch.full((1, 1), 2.0**-24, device=cuda, dtype=torch.float16, requires_grad=True)
        y = f(x, w)
        y.sum().backward()
        results.append((y.detach(), w.grad, x.grad))
    (y1, dw1, dx1), (y2, dw2, dx2) = results
    assert y1.item() == y2.item() == 0.0
    assert dw1.item() == dw2.item() == 0.5
    assert torch.equal(dx1, dx2)


@pytest.mark.parametrize("divisor", [0.0, -0.0, float("nan"), float("inf")])
def test_linear_relu_div_mask_with_a_zero_inf_or_nan_divisor(divisor, cuda):
    torch.manual_seed(5)
    inputs = [torch.randn(16, 8, device=cuda), torch.randn(12, 8, device=cuda), torch.randn(12, device=cuda)]
    g = torch.rand(16, 12, device=cuda)
    grads = []
    for f in (
        lambda x, w, b: cupy_ops.linear_relu_div(x, w, b, divisor),
        lambda x, w, b: torch.relu(F.linear(x, w, b)) / divisor,
    ):
        x, w, b = (t.clone().requires_grad_() for t in inputs)
        f(x, w, b).backward(g)
        grads.append((x.grad, w.grad, b.grad))
    for ours, ref in zip(*grads):
        # sums of 0 and +-inf (or NaN) terms: the same whatever the summation order
        assert torch.equal(ours.isnan(), ref.isnan())
        assert torch.equal(ours.isinf(), ref.isinf())
        torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4, equal_nan=True)


# --- a divisor tensor gets its gradient, as torch gives it -------------------------------


@pytest.mark.parametrize("kind", ["cpu 0-dim", "cuda 0-dim", "cuda (1,)", "cuda float64 (1,)"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_relu_div_divisor_tensor_gets_its_gradient(kind, dtype, cuda):
    torch.manual_seed(0)
    x0 = torch.randn(300, 7, device=cuda).to(dtype)
    g = torch.randn(300, 7, device=cuda).to(dtype)
    device = "cpu" if kind.startswith("cpu") else cuda
    ddtype = torch.float64 if "float64" in kind else dtype
    grads = []
    for f in (cupy_ops.relu_div, lambda t, d: torch.relu(t) / d):
        x = x0.clone().requires_grad_()
        d = torch.tensor(0.37 if "0-dim" in kind else [0.37], dtype=ddtype, device=device).requires_grad_()
        y = f(x, d)
        y.backward(g.to(y.dtype))
        grads.append((y.detach(), x.grad, d.grad))
    (y1, dx1, dd1), (y2, dx2, dd2) = grads
    assert y1.dtype == y2.dtype and y1.shape == y2.shape and torch.equal(y1, y2)
    assert dd1 is not None and dd1.shape == dd2.shape and dd1.device == dd2.device
    assert torch.equal(dx1, dx2) and torch.equal(dd1, dd2)


def test_linear_relu_div_divisor_tensor_gets_its_gradient(cuda):
    torch.manual_seed(0)
    x = torch.randn(32, 16, device=cuda)
    w = torch.randn(8, 16, device=cuda)
    g = torch.randn(32, 8, device=cuda)
    grads = []
    for f in (cupy_ops.linear_relu_div, lambda x, w, b, d: torch.relu(F.linear(x, w, b)) / d):
        d = torch.tensor(1.5, requires_grad=True)
        f(x, w, None, d).backward(g)
        grads.append(d.grad)
    assert grads[0] is not None
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4, rtol=1e-4)


# --- in place on tensors autograd tracks: recorded as torch records it ------------------


def test_inplace_relu_on_a_non_leaf_is_recorded_as_torch_records_it(cuda):
    x0 = torch.randn(1000, device=cuda)
    g = torch.randn(1000, device=cuda)
    grads = []
    for relu_ in (cupy_ops.relu_, torch.relu_):
        x = x0.clone().requires_grad_()
        y = x * 3
        assert relu_(y) is y
        y.backward(g)
        grads.append((y.detach(), x.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


@pytest.mark.parametrize("divisor_requires_grad", [False, True])
def test_inplace_relu_div_on_a_non_leaf_is_recorded(divisor_requires_grad, cuda):
    # the gradient is that of torch.relu(y) / d (torch's own y.relu_().div_(d) cannot be
    # differentiated at all: relu_ saves its output, which div_ then overwrites)
    x0 = torch.randn(1000, device=cuda)
    g = torch.randn(1000, device=cuda)
    results = []
    for name in ("cupy_ops", "torch"):
        x = x0.clone().requires_grad_()
        d = torch.tensor(0.7, requires_grad=divisor_requires_grad)
        y = x * 3
        if name == "cupy_ops":
            assert cupy_ops.relu_div_(y, d) is y
            assert y._version > 0
        else:
            y = torch.relu(y) / d
        y.backward(g)
        results.append((y.detach(), x.grad, d.grad))
    for a, b in zip(*results):
        assert (a is None and b is None) or torch.equal(a, b)


def test_inplace_with_a_divisor_that_requires_grad_makes_x_part_of_the_graph(cuda):
    # x needs no grad but the divisor does: torch records x.div_(d) (x becomes a non-leaf)
    x0 = torch.randn(100, device=cuda)
    results = []
    for inplace in (cupy_ops.relu_div_, lambda t, d: t.relu_().div_(d)):
        x = x0.clone()
        d = torch.tensor(2.5, device=cuda, requires_grad=True)
        inplace(x, d)
        assert x.requires_grad and x.grad_fn is not None
        x.sum().backward()
        results.append((x.detach(), d.grad))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_inplace_on_a_leaf_that_requires_grad_is_an_error(cuda):
    leaf = torch.randn(10, device=cuda, requires_grad=True)
    for f, ref in ((cupy_ops.relu_, torch.relu_), (lambda t: cupy_ops.relu_div_(t, 2.0), lambda t: t.div_(2.0))):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad") as ours:
            f(leaf)
        with pytest.raises(RuntimeError) as theirs:
            ref(leaf)
        assert str(ours.value) in str(theirs.value)
    with torch.no_grad():
        cupy_ops.relu_(leaf)
    assert (leaf >= 0).all()
