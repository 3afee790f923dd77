"""The elementwise launch shape (ops/elementwise.py): vector width and head by alignment, one block
per chunk, every element covered, on the CPU."""

import pytest

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
