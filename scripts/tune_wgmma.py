"""Experiment (GPU, Hopper): the Hopper GEMM's two block-tile widths (128 x 128, 128 x 256)
against torch at several shapes, bf16 and TF32, to set _gemm.WGMMA_WIDE_MIN_WAVES (the
number of waves of 128 x 256 blocks below which 128 x 128 blocks are used). The bn columns
force one width without split-K (at small shapes split-K applies only under "auto")."""
import torch
import torch.nn.functional as F

import cupy_ops
from cupy_ops.bench.timing import time_cuda
from cupy_ops.ops import _gemm

SHAPES = [(256, 1024, 1024), (1024, 1024, 1024), (2048, 2048, 2048), (1024, 8192, 8192), (2048, 8192, 8192),
          (4096, 4096, 4096), (8192, 8192, 8192)]
sms = _gemm.sm_count(0)
pick, split = _gemm.wgmma_tile_n, _gemm.wgmma_split
print(f"{'dtype':<5} {'M x K x N':<16} {'waves@256':>9} {'torch mm':>9} {'bn=128':>14} {'bn=256':>14} {'auto':>14} "
      f"{'torch lin':>9} {'bn=128':>14} {'bn=256':>14} {'auto':>14}  (TFLOP/s, ratio to torch; auto: the "
      f"shape table, with split-K)")
for dname, dtype in (("bf16", torch.bfloat16), ("tf32", torch.float32)):
    torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
    for M, K, N in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        w = b.t().contiguous()
        bias = torch.randn(N, device="cuda", dtype=dtype)
        fl = 2 * M * N * K / 1e9
        t_mm = time_cuda(lambda: torch.matmul(a, b), runs=30).median
        t_lin = time_cuda(lambda: torch.relu(F.linear(a, w, bias)) / 2, runs=30).median
        cells = []
        for fn, t_ref in ((lambda: cupy_ops.matmul(a, b, algo="wgmma"), t_mm),
                          (lambda: cupy_ops.linear_relu_div(a, w, bias, 2.0, algo="wgmma"), t_lin)):
            row = [f"{fl / t_ref:>9.0f}"]
            for bn in (128, 256):
                _gemm.wgmma_tile_n = lambda M, N, device, bn=bn: bn
                _gemm.wgmma_split = lambda M, N, K, *rest: (1, K)
                t = time_cuda(fn, runs=30).median
                row.append(f"{fl / t:>7.0f} ({t_ref / t:.2f}x)")
            _gemm.wgmma_tile_n, _gemm.wgmma_split = pick, split
            t = time_cuda(fn, runs=30).median
            row.append(f"{fl / t:>7.0f} ({t_ref / t:.2f}x)")
            cells += row
        waves = _gemm.launch.cdiv(M, 128) * _gemm.launch.cdiv(N, 256) / sms
        print(f"{dname:<5} {f'{M}x{K}x{N}':<16} {waves:>9.2f} " + " ".join(cells), flush=True)
