"""An op's generated eager call (cupy_ops.op.direct) on the CPU: the common case goes straight to
the launcher with the general path's checks, anything else reaches the general path, and both
give the same values, errors and outputs. Launchers are torch expressions on CPU tensors."""

from typing import Optional

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.utils._python_dispatch import TorchDispatchMode

import cupy_ops
from cupy_ops.op.direct import entry

seen = []  # (op name, the launcher's inputs' strides) of every launch


def _axpy(x: torch.Tensor, y: Optional[torch.Tensor], a: float = 2.0, *, out: torch.Tensor) -> None:
    seen.append(("axpy", x.stride(), None if y is None else y.stride()))
    out.copy_(x * a if y is None else x * a + y)


axpy = cupy_ops.op("directtest::axpy", output=cupy_ops.like("x"), check_devices=False)(_axpy)


@axpy.backward(save=("a",))
def _(ctx, grad):
    return axpy(grad, None, ctx.a), grad, None


def _strided(x: torch.Tensor, *, out: torch.Tensor) -> None:
    seen.append(("strided", x.stride(), out.stride()))
    out.copy_(x + 1)


strided = cupy_ops.op("directtest::strided", output=cupy_ops.like("x"), contiguous=False, check_devices=False)(_strided)


def _fasted(x: torch.Tensor, *, out: torch.Tensor) -> None:
    seen.append(("fasted", x.stride(), None))
    out.copy_(x - 1)


fasted = cupy_ops.op(
    "directtest::fasted",
    output=cupy_ops.like("x"),
    check_devices=False,
    fast=lambda x: (x - 1) if x.dim() == 1 else None,  # the op's fast= hook takes 1-D inputs
)(_fasted)


def _cast(x: torch.Tensor, *, out: torch.Tensor) -> None:
    out.copy_(x * 3)


autocast_op = cupy_ops.op("directtest::cast", output=cupy_ops.like("x"), autocast="fp32", check_devices=False)(_cast)
checked = cupy_ops.op("directtest::checked", output=cupy_ops.like("x"))(_cast)  # check_devices=True


def spied(op):
    """``op``'s generated call with its general path counted."""
    calls = []

    def general(args):
        calls.append(args)
        return op._call_any(args)

    return entry(op, general), calls


class _Counting(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_plain_tensors_launch_without_the_general_path():
    call, general = spied(axpy)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    seen.clear()
    for args in ((x, y, 2.0), (x, None, 0.5), (torch.nn.Parameter(x, requires_grad=False), y, 1.5)):
        torch.testing.assert_close(call(args), args[0] * args[2] + (0 if args[1] is None else args[1]), rtol=0, atol=0)
    assert general == [] and len(seen) == 3
    # grad mode off: a tensor that requires grad records nothing, so the common case again
    with torch.no_grad():
        call((x.clone().requires_grad_(), y, 2.0))
    assert general == []


@pytest.mark.parametrize(
    "case",
    ["neg_bit", "not_a_tensor", "dispatch_mode", "forward_ad", "vmap", "subclass", "jit_trace"],
)
def test_every_other_case_reaches_the_general_path_with_its_result(case):
    call, general = spied(axpy)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    if case == "neg_bit":
        out = call((torch._neg_view(x), y, 2.0))
        torch.testing.assert_close(out, -x * 2 + y, rtol=0, atol=0)
    elif case == "not_a_tensor":
        with pytest.raises(TypeError, match=r"x must be a torch\.Tensor, got list"):
            call(([1.0], y, 2.0))
    elif case == "dispatch_mode":
        with _Counting():
            out = call((x, y, 2.0))
        torch.testing.assert_close(out, x * 2 + y, rtol=0, atol=0)
    elif case == "forward_ad":
        with fwAD.dual_level(), pytest.raises(RuntimeError, match="directtest::axpy has no forward-mode AD rule"):
            call((fwAD.make_dual(x, torch.ones_like(x)), y, 2.0))
    elif case == "vmap":
        with pytest.raises(RuntimeError, match="directtest::axpy has no vmap rule"):
            torch.func.vmap(lambda t: call((t, None, 2.0)))(x)
    elif case == "subclass":

        class Sub(torch.Tensor):
            pass

        out = call((x.as_subclass(Sub), y, 2.0))
        torch.testing.assert_close(out.as_subclass(torch.Tensor), x * 2 + y, rtol=0, atol=0)
    else:
        traced = torch.jit.trace(lambda t: call((t, y, 2.0)), (x,), check_trace=False)
        torch.testing.assert_close(traced(x), x * 2 + y, rtol=0, atol=0)
    assert len(general) >= 1


def test_a_call_autograd_records_runs_the_ops_autograd_function():
    call, general = spied(axpy)
    x, y = torch.randn(3, 4).requires_grad_(), torch.randn(3, 4)
    out = call((x, y, 2.0))
    assert type(out.grad_fn).__name__ == "EagerBackward" and general == []  # the op's eager Function
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0), rtol=0, atol=0)


def test_inputs_are_made_contiguous_where_the_op_says_and_the_output_follows_like():
    call, general = spied(axpy)
    x = torch.randn(4, 3).t()  # a transposed view
    seen.clear()
    out = call((x, None, 2.0))
    assert seen == [("axpy", (4, 1), None)] and out.is_contiguous() and general == []
    torch.testing.assert_close(out, x * 2, rtol=0, atol=0)
    # contiguous=False: the input as it is, the output in its layout (like's preserve_format)
    call2, _ = spied(strided)
    seen.clear()
    out = call2((x,))
    assert seen == [("strided", x.stride(), x.stride())] and out.stride() == x.stride()


def test_the_fast_hook_is_tried_first_and_declines_to_the_launcher():
    call, general = spied(fasted)
    seen.clear()
    v, m = torch.randn(5), torch.randn(2, 3)
    torch.testing.assert_close(call((v,)), v - 1, rtol=0, atol=0)
    assert seen == []  # the hook took it
    torch.testing.assert_close(call((m,)), m - 1, rtol=0, atol=0)
    assert seen == [("fasted", (3, 1), None)] and general == []


def test_autocast_ops_take_the_general_path_under_autocast_only():
    call, general = spied(autocast_op)
    x = torch.randn(3, 3, dtype=torch.bfloat16)
    assert call((x,)).dtype == torch.bfloat16 and general == []
    # CUDA's autocast state, the one the op layer reads (it casts CUDA tensors only: these stay)
    torch.set_autocast_enabled("cuda", True)
    try:
        out = call((x,))
    finally:
        torch.set_autocast_enabled("cuda", False)
    assert len(general) == 1 and out.dtype == torch.bfloat16


def test_the_device_check_raises_what_the_general_path_raises():
    call, _ = spied(checked)
    x = torch.randn(3)
    with pytest.raises(ValueError) as ours:
        call((x,))
    with pytest.raises(ValueError) as theirs:
        checked._call_any((x,))
    assert str(ours.value) == str(theirs.value) and "cuda" in str(ours.value).lower()


def test_the_ops_eager_call_is_the_generated_one():
    x = torch.randn(2, 2)
    seen.clear()
    torch.testing.assert_close(axpy(x, None), x * 2, rtol=0, atol=0)
    assert axpy.call.__code__.co_filename == "<cupy_ops eager call of directtest::axpy>"
    assert cupy_ops.Op.declared("cupy_ops::relu").call.__code__.co_filename.startswith("<cupy_ops eager call")


def test_an_attribute_assigned_after_the_declaration_reaches_every_path():
    def _launch(x: torch.Tensor, *, out: torch.Tensor) -> None:
        out.fill_(1.0)

    op = cupy_ops.op("directtest::swapped", output=cupy_ops.like("x"), check_devices=False)(_launch)

    @op.backward
    def _(ctx, grad):
        return grad

    x = torch.zeros(2)
    assert op(x).tolist() == [1.0, 1.0]
    op.launch = lambda x, *, out: out.fill_(100.0)
    # the plain call, the call autograd records and the registered op all take the new launcher
    assert op(x).tolist() == [100.0, 100.0]
    assert op(x.clone().requires_grad_()).tolist() == [100.0, 100.0]
    assert torch.ops.directtest.swapped(x).tolist() == [100.0, 100.0]
    op.fast = lambda x: torch.full_like(x, 7.0)
    assert op(x).tolist() == [7.0, 7.0] and op._call_any((x,)).tolist() == [7.0, 7.0]
    op.fast, op.check_devices = None, True
    with pytest.raises(ValueError, match="CUDA tensor"):
        op(x)


def test_one_like_rule_serves_several_ops_each_with_its_own_input():
    rule = cupy_ops.like("x")

    def _a(x: torch.Tensor, *, out: torch.Tensor) -> None:
        out.copy_(x)

    def _b(w: torch.Tensor, x: torch.Tensor, *, out: torch.Tensor) -> None:
        out.copy_(x)

    a = cupy_ops.op("directtest::like_a", output=rule, contiguous=False, check_devices=False)(_a)
    b = cupy_ops.op("directtest::like_b", output=rule, check_devices=False)(_b)
    t = torch.randn(4, 3).t()
    assert a(t).stride() == t.stride() and a._call_any((t,)).stride() == t.stride()  # its own layout rule
    w, x = torch.randn(5), torch.randn(2, 2)
    assert b(w, x).shape == (2, 2) and b._call_any((w, x)).shape == (2, 2)  # its own input's index
    assert rule.index is None  # the declared rule itself is left as written
