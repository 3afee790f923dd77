"""Bad arguments raise typed errors naming the argument (CPU: validation runs before any launch)."""

import pytest
import torch

import cupy_ops
from cupy_ops import checks

X = torch.randn(4, 8)
W = torch.randn(6, 8)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: cupy_ops.relu([1.0, 2.0]), TypeError, "x must be a torch.Tensor, got list"),
        (lambda: cupy_ops.relu(torch.ones(3, dtype=torch.int32)), TypeError, "x must have dtype.*got torch.int32"),
        (lambda: cupy_ops.relu(torch.ones(3, dtype=torch.bool)), TypeError, "x must have dtype"),
        (lambda: cupy_ops.relu(torch.ones(3, dtype=torch.complex64)), TypeError, "x must have dtype"),
        (lambda: cupy_ops.relu(torch.randn(4)), ValueError, "x must be a CUDA tensor, got a tensor on cpu"),
        (lambda: cupy_ops.relu_(torch.randn(4)), ValueError, "x must be a CUDA tensor"),
        (lambda: cupy_ops.relu_div(torch.randn(4), 2.0), ValueError, "x must be a CUDA tensor"),
        (lambda: cupy_ops.relu_div("x", 2.0), TypeError, "x must be a torch.Tensor, got str"),
        (lambda: cupy_ops.relu_div_(torch.randn(4), 2.0), ValueError, "x must be a CUDA tensor"),
        (lambda: cupy_ops.matmul(X, "b"), TypeError, "b must be a torch.Tensor, got str"),
        (lambda: cupy_ops.matmul(X, W.t().half()), TypeError, "b must have the same dtype as a"),
        (
            lambda: cupy_ops.matmul(torch.tensor(1.0), W.t()),
            ValueError,
            "both arguments to matmul need to be at least 1D",
        ),
        (
            lambda: cupy_ops.matmul(torch.randn(2, 4, 8), torch.randn(3, 8, 6)),
            ValueError,
            r"The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton dimension 0",
        ),
        (lambda: cupy_ops.matmul(X, W), ValueError, "inner dimensions differ"),
        (lambda: cupy_ops.matmul(X, W.t()), ValueError, "a must be a CUDA tensor"),
        (lambda: cupy_ops.matmul(X, W.t(), algo="fast"), ValueError, "algo must be one of"),
        (lambda: cupy_ops.linear_relu_div(X, W, None, 2.0), ValueError, "x must be a CUDA tensor"),
        (lambda: cupy_ops.linear_relu_div(X, W[:, :5], None, 2.0), ValueError, "in_features differ"),
        (lambda: cupy_ops.linear_relu_div(X, W, torch.randn(5), 2.0), ValueError, r"bias must have shape \(6,\)"),
        (
            lambda: cupy_ops.linear_relu_div(X, W, torch.randn(6).double(), 2.0),
            TypeError,
            "bias must have the same dtype",
        ),
        (lambda: cupy_ops.linear_relu_div(X, W, 3, 2.0), TypeError, "bias must be a torch.Tensor, got int"),
        (
            lambda: cupy_ops.linear_relu_div(X, None, None, 2.0),
            TypeError,
            "weight must be a torch.Tensor, got NoneType",
        ),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    "divisor, exc, match",
    [
        ("2", TypeError, "divisor must be a real number or a one-element tensor, got str"),
        (None, TypeError, "got NoneType"),
        (1 + 2j, TypeError, "got complex"),
        (
            torch.tensor([1.0, 2.0]),
            ValueError,
            r"divisor must be a number or a one-element tensor, got a tensor of shape \(2,\)",
        ),
        (torch.tensor(1 + 1j), TypeError, "divisor must be a real number, got a tensor of dtype torch.complex64"),
    ],
)
def test_bad_divisor(divisor, exc, match):
    from cupy_ops import checks

    with pytest.raises(exc, match=match):
        checks.divisor(divisor, 0)


def test_errors_leave_the_library_usable():
    with pytest.raises(ValueError):
        cupy_ops.relu(torch.randn(3))
    with pytest.raises(TypeError):
        cupy_ops.relu(3)
    with pytest.raises(ValueError, match="x must be a CUDA tensor"):
        cupy_ops.relu(torch.randn(3))


def test_a_gemm_plan_of_an_empty_output_is_a_value_error():
    from cupy_ops import checks

    with pytest.raises(ValueError, match=r"no kernel runs for an empty output \(0 x 5\)"):
        checks.nonempty_output(0, 5)
    checks.nonempty_output(1, 5)


def test_is_dense():
    x = torch.empty(4, 6)
    assert checks.dense(x)
    assert checks.dense(x.t())
    assert checks.dense(torch.empty(2, 3, 4).permute(2, 0, 1))
    assert checks.dense(torch.empty(4, 1, 6)[:, :, :])
    assert not checks.dense(x[:, 1:])
    assert not checks.dense(x[::2])
    assert checks.dense(x[1:])  # offset views are still one block
    assert not checks.dense(torch.empty(3).expand(4, 3))  # overlapping
