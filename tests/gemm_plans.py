"""Shared by the GEMM plan tests (pure, CPU): the devices and operand layouts plans are made
for, the plan of a problem (``gplan``), and the branches of the plan, named: which kernel path a
``GemmPlan`` takes (``branch``) and whether its output is covered by whole tiles (``full_tiles``),
so a CPU test can say which branch a shape reaches on a given device."""

from dataclasses import dataclass

import torch

from cupy_ops.ops import gemm
from cupy_ops.ops.gemm import Device, Matrix

bf16, f16, f32, f64 = torch.bfloat16, torch.float16, torch.float32, torch.float64
# H100 SXM and H200: 132 SMs, compute capability 9.0; peak memory bandwidth in bytes a microsecond
H100 = Device(0, 132, (9, 0), 3.35e6)
H200 = Device(0, 132, (9, 0), 4.8e6)
A100 = Device(0, 108, (8, 0))
ES = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2, torch.float64: 8}


def rowmajor(r, c, dtype=torch.float32, aligned=True):
    return Matrix(r, c, c, 1, ES[dtype], aligned)


def colmajor(r, c, dtype=torch.float32):
    return Matrix(r, c, 1, r, ES[dtype], True)


def gplan(M, K, N, dtype=torch.float32, a=None, b=None, epi="EpiNone", dev=H100, **kw):
    return gemm.plan(M, N, K, dtype, a or rowmajor(M, K, dtype), b or rowmajor(K, N, dtype), epi, dev, **kw)


def branch(p) -> str:
    """The plan's branch: its family and, within it, the kernel path (split-K, K-split
    warpgroups, one tile per CTA, persistent pairs, C^T = B^T A^T (tf32x3: of a row-major or a
    K-major b), fp16x3's N-major split)."""
    if p.family in ("naive", "tc"):
        return p.family
    if p.family == "simt":
        return "simt split-K" if p.slices > 1 else "simt"
    if p.family == "wgmma":
        if p.single:
            return "wgmma one 128x64 tile per CTA"
        if p.ksplit:
            return f"wgmma K-split warpgroups {p.tile[1]}-wide"
        if p.slices > 1:
            return "wgmma split-K" + (" swapped" if p.swap else "")
        base = "wgmma persistent pairs" if p.persistent and p.cluster == 2 else "wgmma one CTA a tile"
        return base + (f" {p.tile[1]}-wide") + (" swapped" if p.swap else "")
    if p.family == "tf32x3":
        return (
            "tf32x3"
            + (" split-K" if p.slices > 1 else "")
            + ((" swapped" if p.b.prep == "n-major" else " swapped K-major b") if p.swap else "")
            + (" A split by a pass" if p.presplit else "")
        )
    if p.family == "fp16x3":
        return (
            "fp16x3" + (" split-K" if p.slices > 1 else "") + (" N-major split" if p.b.prep == "n-major split" else "")
        )
    raise AssertionError(f"unknown family in {p}")


def full_tiles(p, M: int, N: int) -> bool:
    """Whether the kernel's output (C^T's where the plan swaps the operands) is whole tiles."""
    rows, cols = (N, M) if p.swap else (M, N)
    return rows % p.tile[0] == 0 and cols % p.tile[1] == 0


@dataclass(frozen=True)
class Case:
    """``op``: "matmul" (a (M, K) @ b (K, N), both contiguous: b row-major) or "linear"
    (linear_relu_div(x (M, K), weight (N, K), bias, 2.0): B = weight.T, K-major)."""

    op: str
    algo: str
    dtype: torch.dtype
    M: int
    K: int
    N: int
    branch: str
    full: bool

    @property
    def id(self) -> str:
        return f"{self.algo}-{str(self.dtype)[6:]}-{self.op}-{self.M}x{self.K}x{self.N}"


# (group, cases): the groups compile as one function each (one compile per group keeps the
# file's GPU time small); shapes no larger than needed to reach the branch
GROUPS = {
    "cuda-core": [
        Case("matmul", "naive", f64, 100, 70, 50, "naive", True),
        Case("linear", "naive", f32, 33, 70, 17, "naive", True),
        Case("matmul", "simt", f32, 1024, 256, 2048, "simt", True),
        Case("linear", "simt", f32, 1000, 256, 1000, "simt split-K", False),
        Case("matmul", "simt", f32, 256, 1024, 256, "simt split-K", True),
        Case("matmul", "tc", bf16, 300, 200, 264, "tc", False),
        Case("linear", "tc", f32, 256, 200, 256, "tc", True),
    ],
    "wgmma": [
        Case("matmul", "wgmma", bf16, 256, 512, 256, "wgmma K-split warpgroups 64-wide", True),
        Case("linear", "wgmma", f32, 200, 256, 100, "wgmma K-split warpgroups 64-wide", False),
        Case("linear", "wgmma", f16, 2000, 256, 1000, "wgmma one CTA a tile 128-wide", False),
        Case("matmul", "wgmma", bf16, 2048, 128, 2048, "wgmma one CTA a tile 256-wide", True),
        Case("matmul", "wgmma", bf16, 768, 1024, 768, "wgmma one 128x64 tile per CTA", True),
        Case("linear", "wgmma", f16, 700, 1100, 900, "wgmma one 128x64 tile per CTA", False),
        Case("matmul", "wgmma", bf16, 384, 2048, 1536, "wgmma K-split warpgroups 128-wide", True),
        Case("linear", "wgmma", f32, 300, 1000, 2000, "wgmma K-split warpgroups 128-wide", False),
        Case("matmul", "wgmma", bf16, 200, 8192, 200, "wgmma split-K", False),
        Case("linear", "wgmma", f32, 256, 4096, 256, "wgmma split-K", True),
        Case("matmul", "wgmma", bf16, 2304, 64, 2304, "wgmma persistent pairs 128-wide", True),
        Case("linear", "wgmma", f16, 2200, 64, 2600, "wgmma persistent pairs 128-wide", False),
        Case("matmul", "wgmma", bf16, 4096, 64, 4096, "wgmma persistent pairs 256-wide", True),
        Case("matmul", "wgmma", f32, 1000, 256, 1000, "wgmma one CTA a tile 64-wide swapped", False),
        Case("matmul", "wgmma", f32, 2304, 64, 2304, "wgmma persistent pairs 128-wide swapped", True),
        Case("matmul", "wgmma", f32, 200, 4092, 260, "wgmma split-K swapped", False),
        Case("matmul", "wgmma", f32, 256, 4096, 256, "wgmma split-K swapped", True),
        Case("linear", "wgmma", f32, 2048, 128, 2048, "wgmma one CTA a tile 256-wide", True),
    ],
    "tf32x3": [
        Case("matmul", "tf32x3", f32, 256, 1024, 256, "tf32x3 split-K swapped", True),
        Case("matmul", "tf32x3", f32, 1024, 256, 2048, "tf32x3 swapped", True),
        Case("linear", "tf32x3", f32, 1000, 256, 2000, "tf32x3", False),
        Case("matmul", "tf32x3", f32, 300, 1000, 130, "tf32x3 split-K", False),
        Case("linear", "tf32x3", f32, 300, 1024, 8192, "tf32x3 swapped K-major b A split by a pass", False),
        Case("linear", "tf32x3", f32, 128, 4096, 8192, "tf32x3 split-K swapped K-major b A split by a pass", True),
        Case("matmul", "tf32x3", f32, 512, 1024, 8200, "tf32x3 swapped A split by a pass", False),
        Case("matmul", "tf32x3", f32, 256, 1024, 4096, "tf32x3 split-K swapped A split by a pass", True),
    ],
    "fp16x3": [
        Case("matmul", "fp16x3", f32, 256, 1024, 256, "fp16x3 split-K N-major split", True),
        Case("matmul", "fp16x3", f32, 1024, 256, 2048, "fp16x3 N-major split", True),
        Case("linear", "fp16x3", f32, 1000, 256, 2000, "fp16x3", False),
        Case("linear", "fp16x3", f32, 256, 2048, 256, "fp16x3 split-K", True),
        Case("matmul", "fp16x3", f32, 300, 1000, 130, "fp16x3", False),
    ],
}


ALL_CASES = [c for cases in GROUPS.values() for c in cases]
