"""The elementwise family (ops/elementwise.py): the launch shape (vector width and head by
alignment, one block per chunk, every element covered, on the CPU) and the eager fast paths."""

import pytest
import torch

import cupy_ops
from cupy_ops.ops import elementwise


def plan(n, itemsize, *ptrs):
    """(blocks, head, vec) of an elementwise launch."""
    return elementwise.plan(n, itemsize, ptrs)


@pytest.mark.parametrize(
    "n, itemsize, x_off, y_off, expect_vec, expect_head",
    [
        (1000, 4, 0, 0, 1, 0),  # both aligned: vectors from the first element
        (1000, 4, 4, 4, 1, 3),  # both at +4 bytes (x[1:] in place): 3 scalars reach 16
        (1000, 2, 2, 2, 1, 7),  # fp16 at +2 bytes: 7 scalars
        (2, 4, 4, 4, 1, 2),  # head never exceeds n
        (1000, 4, 4, 0, 0, 0),  # different alignment (x[1:] into a fresh y): scalar path
        (1000, 8, 8, 8, 1, 1),  # float64 at +8
    ],
)
def test_elementwise_plan_alignment(n, itemsize, x_off, y_off, expect_vec, expect_head):
    base = 1 << 20
    blocks, head, vec = plan(n, itemsize, base + x_off, base + y_off)
    assert (vec, head) == (expect_vec, expect_head)
    if vec and head < n:
        assert (base + x_off + head * itemsize) % 16 == 0
    assert blocks >= 1


def test_elementwise_plan_binary_needs_all_three_aligned():
    assert plan(1000, 4, 16, 32, 48)[2] == 1
    assert plan(1000, 4, 16, 36, 48)[2] == 0
    assert plan(1000, 4, 20, 36, 52) == (plan(1000, 4, 20, 36)[0], 3, 1)


def test_elementwise_plan_one_block_per_chunk():
    chunk = elementwise.THREADS * elementwise.VECS_PER_THREAD * 16  # bytes per block
    blocks, _, _ = plan(4096 * 393216, 4, 0, 0)
    assert blocks == 4096 * 393216 * 4 // chunk  # KernelBench ReLU: 1.57 M blocks
    blocks, _, _ = plan(3, 4, 0, 0)
    assert blocks == 1  # no full vector: block 0 does head/tail
    blocks, _, _ = plan(2**31 + 17, 2, 0, 2)  # misaligned, > 2**31 elements
    assert blocks == -(-(2**31 + 17) // (elementwise.THREADS * 8))


def test_elementwise_plan_covers_every_element():
    chunk = elementwise.THREADS * elementwise.VECS_PER_THREAD * 16
    for n in [1, 3, 4, 5, 127, 128, 129, 4097, 100003]:
        for itemsize in (2, 4, 8):
            for off in range(0, 16, itemsize):
                for y_off in (off, 0):
                    blocks, head, vec = plan(n, itemsize, 64 + off, 64 + y_off)
                    if vec:
                        vecs = (n - head) * itemsize // 16
                        tail = n - head - vecs * 16 // itemsize
                        assert head < 16 // itemsize and tail < 16 // itemsize
                        assert head <= elementwise.THREADS and blocks * chunk >= vecs * 16
                    else:
                        assert blocks * elementwise.THREADS * 8 >= n


def _flat_relu(storages):
    """A stand-in for the relu kernel on the CPU: ``(x, y, n, ...)`` read and written as flat
    arrays of float32 at those addresses, inside one of ``storages``, as the kernel reads them."""

    def flat(ptr):
        for st in storages:
            if st.data_ptr() <= ptr < st.data_ptr() + st.nbytes():
                whole = torch.empty(0).set_(st, 0, (st.nbytes() // 4,), (1,))
                return whole[(ptr - st.data_ptr()) // 4 :]
        raise AssertionError(f"address {ptr:#x} is in no tensor the test made")

    def launch(handle, grid, block, args):
        px, py, n = args[:3]
        flat(py)[:n] = flat(px)[:n].clamp_min(0)

    return launch


@pytest.mark.parametrize(
    "view",
    [lambda t: t[:, ::2], lambda t: t.t()[1::3], lambda t: t[::2, 1:], lambda t: t.t()],
    ids=["x[:, ::2]", "x.t()[1::3]", "x[::2, 1:]", "x.t()"],
)
def test_in_place_writes_the_views_elements_and_nothing_else_of_its_base(view, monkeypatch):
    """``write(x, x)`` (in place) walks x as a flat array only where it is one: a view with gaps
    goes through a dense copy and back (walked flat, it once wrote relu over whatever memory
    followed the view's first element, its own later rows left as they were)."""
    from cupy_ops.ops.relu import KERNEL as RELU

    storages = []
    monkeypatch.setattr(elementwise, "_handles", {(RELU._variants[torch.float32], -1): object()})
    monkeypatch.setattr(elementwise, "_launch", _flat_relu(storages))
    made = torch.empty_like

    def empty_like(*args, **kwargs):  # the dense copy's memory, where the stand-in may write
        t = made(*args, **kwargs)
        storages.append(t.untyped_storage())
        return t

    monkeypatch.setattr(torch, "empty_like", empty_like)
    base = torch.randn(33, 65, generator=torch.Generator().manual_seed(0))
    storages.append(base.untyped_storage())
    expected = base.clone()
    view(expected).relu_()
    z = view(base)
    RELU.write(z, z, ())
    assert torch.equal(base, expected)


# --- the eager fast paths (Elementwise.fresh / fresh2: relu's and relu_backward's fast=) ---------


def test_the_fast_paths_decline_what_only_the_general_path_may_answer():
    """A CPU tensor, an integer dtype, a non-contiguous view, mismatched operands: no kernel
    handle or layout to launch with, so the fast path returns None and the op's output rule
    raises (CPU: no handle is ever loaded for device -1)."""
    from cupy_ops.ops.relu import KERNEL as RELU
    from cupy_ops.ops.relu_backward import KERNEL as RELU_BACKWARD

    x = torch.randn(8, 8)
    assert RELU.fresh(x) is None
    assert RELU.fresh(x.int()) is None
    assert RELU.fresh(x.t()) is None
    assert RELU_BACKWARD.fresh2(x, x, (1.0,)) is None
    assert RELU_BACKWARD.fresh2(x, x.double(), (1.0,)) is None
    with pytest.raises(ValueError, match="CUDA"):
        cupy_ops.relu(x)


def test_the_fast_paths_launch_what_the_general_path_would_bit_for_bit(cuda):
    """Once a dtype's kernel is loaded, a contiguous call takes the fast path (it returns a
    tensor), with torch's values and layout; anything it declines (a transposed view, operands
    of two shapes) still gives torch's answer or error through the general path."""
    from cupy_ops.ops.relu import KERNEL as RELU
    from cupy_ops.ops.relu_backward import KERNEL as RELU_BACKWARD
    from cupy_ops.ops.relu_backward import relu_backward

    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        x = torch.randn(129, 33, device=cuda, dtype=dtype)
        x[0, :4] = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf")], dtype=dtype)
        cupy_ops.relu(x)  # loads the kernel
        got = RELU.fresh(x)
        assert got is not None and got.is_contiguous() and got.shape == x.shape
        assert (got.view(-1).view(torch.uint8) == torch.relu(x).view(-1).view(torch.uint8)).all()
        assert RELU.fresh(x.t()) is None
        g = torch.randn_like(x)
        want = torch.ops.aten.threshold_backward(g, torch.relu(x), 0)
        relu_backward(g, torch.relu(x))  # loads the kernel
        got = RELU_BACKWARD.fresh2(g, torch.relu(x), (1.0,))
        assert got is not None
        assert (got.view(-1).view(torch.uint8) == want.view(-1).view(torch.uint8)).all()
        assert RELU_BACKWARD.fresh2(g, torch.relu(x)[:, :32], (1.0,)) is None
        with pytest.raises(ValueError, match="shape"):
            relu_backward(g, torch.relu(x)[:, :32].contiguous())
    got, want = cupy_ops.relu(x.t()), torch.relu(x.t())  # declined: the general path, torch's layout
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
