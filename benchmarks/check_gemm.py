"""Quick correctness table of every GEMM kernel family against torch (GPU): one line per
(algo, dtype, B layout, shape) with the largest error relative to max |torch result|.
A development probe to run before the full test suite (which carries the real bounds).

    python benchmarks/check_gemm.py [algo ...]     (default: every tensor-core family this GPU has)
"""

import sys

import torch

import cupy_ops
from cupy_ops.bench.env import describe, environment

SHAPES = [(128, 64, 256), (256, 192, 512), (130, 70, 300), (1, 8, 1), (1024, 1024, 1024), (77, 4099, 260)]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "tf32": torch.float32}


def main(algos):
    torch.manual_seed(0)
    print(describe(environment()))
    print(f"{'algo':<6} {'dtype':<5} {'b layout':<10} {'M x K x N':<16} {'matmul err':>11} {'linear err':>11}")
    worst = 0.0
    for algo in algos:
        for dname, dt in DTYPES.items():
            torch.backends.cuda.matmul.allow_tf32 = dname == "tf32"
            for M, K, N in SHAPES:
                a = torch.randn(M, K, device="cuda", dtype=dt)
                for layout in ("row-major", "transposed"):
                    b = (
                        torch.randn(K, N, device="cuda", dtype=dt)
                        if layout == "row-major"
                        else torch.randn(N, K, device="cuda", dtype=dt).t()
                    )
                    ref = a.double() @ b.double()
                    got = cupy_ops.matmul(a, b, algo=algo).double()
                    e1 = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
                    w = b.t()
                    bias = torch.randn(N, device="cuda", dtype=dt)
                    lref = torch.relu(a.double() @ w.double().t() + bias.double()) / 2
                    lgot = cupy_ops.linear_relu_div(a, w, bias, 2.0, algo=algo).double()
                    e2 = ((lgot - lref).abs().max() / lref.abs().max().clamp_min(1e-30)).item()
                    worst = max(worst, e1, e2)
                    print(f"{algo:<6} {dname:<5} {layout:<10} {f'{M}x{K}x{N}':<16} {e1:>11.2e} {e2:>11.2e}")
    torch.cuda.synchronize()
    print(f"worst relative error: {worst:.2e}")


if __name__ == "__main__":
    probe = torch.ones(1, 1, device="cuda", dtype=torch.bfloat16)
    default = []
    for algo in ("wgmma", "tc"):
        try:
            cupy_ops.gemm_plan(probe, probe, algo=algo)
            default.append(algo)
        except ValueError:  # not on this GPU
            pass
    main(sys.argv[1:] or default)
