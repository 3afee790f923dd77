"""In-place and out=: each behaviour side by side with torch's own (torch.clamp_min(x, 0, out=)
is torch's relu with an out= form; x.div_(d) its in-place divide)."""
import pytest
import torch

import cupy_ops
from conftest import assert_bitwise_equal

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
    write = {"relu_": lambda: cupy_ops.relu_(w), "relu_div_": lambda: cupy_ops.relu_div_(w, 2.0),
             "relu out=": lambda: cupy_ops.relu(w.detach().clone(), out=w),
             "relu_div out=": lambda: cupy_ops.relu_div(w.detach().clone(), 3.0, out=w)}[inplace]
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
    raises_like_torch(PARTIAL, lambda: cupy_ops.relu(buf[:-1], out=buf[1:]),
                      lambda: torch.clamp_min(buf[:-1], 0, out=buf[1:]))
    raises_like_torch(PARTIAL, lambda: cupy_ops.relu_div(buf[:-1], 2.0, out=buf[1:]),
                      lambda: torch.div(buf[:-1], 2.0, out=buf[1:]))
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
    raises_like_torch("a leaf Variable that requires grad is being used in an in-place operation",
                      lambda: cupy_ops.relu_(leaf), lambda: torch.relu_(leaf))
