"""How TF32 operands are rounded (GPU probe): torch's cuBLAS, the mma.sync kernel (algo="tc")
and the wgmma kernel with each TMA element type. With K = 8 every product of two TF32 values
is exact in fp32, so the result tells which operand rounding was applied: the count of
outputs differing from each model (round-to-nearest-away "rna", truncation "rz") is printed.

    python scripts/probe_tf32.py
"""
import torch

import cupy_ops
from cupy_ops.ops import _tma


def tf32(x: torch.Tensor, mode: str) -> torch.Tensor:
    bits = x.view(torch.int32)
    if mode == "rna":   # half a TF32 ulp added to the magnitude (sign-magnitude bits), then truncate
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


def model(a, b, mode):
    return (tf32(a, mode).double() @ tf32(b, mode).double()).float()


def main():
    torch.manual_seed(0)
    M, K, N = 512, 8, 512
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    results = {"torch (cuBLAS)": torch.matmul(a, b)}
    results["cupy_ops tc"] = cupy_ops.matmul(a, b, algo="tc")
    for code, name in ((7, "FLOAT32"), (11, "TFLOAT32")):
        _tma._DATA_TYPE[torch.float32] = code
        _tma._cache.clear()
        results[f"cupy_ops wgmma, TMA {name}"] = cupy_ops.matmul(a, b, algo="wgmma")
        results[f"cupy_ops wgmma linear, TMA {name}"] = cupy_ops.linear_relu_div(a, b.t(), None, 1.0, algo="wgmma")
    _tma._DATA_TYPE[torch.float32] = 7
    _tma._cache.clear()
    models = {m: model(a, b, m) for m in ("rna", "rz")}
    print(f"{'result':<36} " + " ".join(f"{'!= ' + m:>9}" for m in models) + f" {'max |d| vs rna':>15}")
    for name, r in results.items():
        if "linear" in name:
            diffs = [int((r != torch.relu(mv)).sum()) for mv in models.values()]
            dmax = (r - torch.relu(models["rna"])).abs().max().item()
        else:
            diffs = [int((r != mv).sum()) for mv in models.values()]
            dmax = (r - models["rna"]).abs().max().item()
        print(f"{name:<36} " + " ".join(f"{d:>9}" for d in diffs) + f" {dmax:>15.3e}")
    print(f"(of {M * N} outputs)")


if __name__ == "__main__":
    main()
