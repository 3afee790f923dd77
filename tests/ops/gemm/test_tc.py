"""algo="tc" (tensor cores through mma.sync, sm_80+): the K = 0 plan of the Hopper families, and
operands transposed into its tensor-core form."""

import pytest
import torch

from cupy_ops.ops import gemm

from gemm_plans import gplan


def test_k_zero_on_hopper_takes_the_tc_kernel():
    p = gplan(64, 0, 64, torch.bfloat16)
    assert p.family == "tc" and "K == 0" in str(p)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_tensor_core_operand_transpose(dtype, cuda):
    """tc_operand brings a column-major view into K-major rows with 16-byte aligned pitch
    (the tiled transpose kernel): exact copy of every element, padding zeroed."""
    big = torch.randn(300, 200, device=cuda).to(dtype)
    for view in (
        big.t(),
        big[3:, 5:].t(),
        big[:33, :1].t(),
        big[:1, :77].t(),
        big[::2, :65].t(),
        torch.randn(70001, 3, device=cuda).to(dtype).t(),
    ):
        op = gemm.common.kmajor_operand(gemm.Matrix.of(view))
        buf, ld = gemm.runtime.prepare(view, op), op.ld
        _rows, k = view.shape
        assert ld % (16 // buf.element_size()) == 0 and buf.data_ptr() % 16 == 0
        assert buf.stride(0) == ld and torch.equal(buf[:, :k], view)
        if ld > k:
            assert torch.equal(buf[:, k:], torch.zeros_like(buf[:, k:]))
