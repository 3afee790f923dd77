"""What every GEMM family shares (ops/gemm/common.py): the operand preparation a plan names."""

import torch

from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import Matrix

from gemm_plans import colmajor, gplan, rowmajor


def test_operand_preparation():
    # matmul's row-major b in TF32: the tensor cores read K-major only, so b.T is transposed
    # by the tiled kernel; a 16-bit row-major b is read in place (N-major)
    assert gplan(300, 200, 100, tf32=True, algo="tc").b.prep == "transpose"
    assert gplan(300, 200, 128, torch.bfloat16).b.prep == "n-major"
    assert gplan(300, 200, 100, torch.bfloat16).b.prep == "transpose"  # 200-byte rows: not a TMA pitch
    # linear_relu_div: b = weight.T of a row-major weight, read in place (K-major)
    w = rowmajor(100, 200, torch.bfloat16)
    p = gplan(300, 200, 100, torch.bfloat16, b=w.T, epi="EpiBiasReluScale")
    assert p.b.prep == "as is" and p.kernel == "gemm_wgmma_ksplit<bf16, false, 64, EpiBiasReluScale>"
    # rows that do not start on 16-byte boundaries (x[:, 1:]) are copied for the tensor cores
    a = Matrix(300, 199, 200, 1, 2, False)
    assert gplan(300, 199, 100, torch.bfloat16, a=a).a.prep == "k-major copy"
    # the CUDA-core kernel reads transposed views in place and copies only gapped views
    p = gplan(300, 200, 100, a=colmajor(300, 200), b=colmajor(200, 100))
    assert (p.a.prep, p.a.kmajor, p.b.prep, p.b.kmajor) == ("as is", False, "as is", True)
    gapped = Matrix(200, 100, 300, 3, 4, True)
    assert gplan(300, 200, 100, b=gapped).b == gemm.Operand("contiguous copy", False, 100, True)
