"""The branches of the GEMM plan, named: which kernel path a ``GemmPlan`` takes (``branch``) and
whether its output is covered by whole tiles (``full_tiles``). Shared by the tests that must
reach every branch (test_compile_graphs.py, test_properties.py); read off the plan only, so a
CPU test can say which branch a shape reaches on a given device."""
from cupy_ops.ops.gemm import Device

H100 = Device(0, 132, (9, 0))   # H100 SXM and H200 alike: 132 SMs, compute capability 9.0
A100 = Device(0, 108, (8, 0))


def branch(p) -> str:
    """The plan's branch: its family and, within it, the kernel path (split-K, K-split
    warpgroups, one tile per CTA, persistent pairs, C^T = B^T A^T, fp16x3's N-major split)."""
    if p.family in ("naive", "tc"):
        return p.family
    if p.family == "simt":
        return "simt split-K" if p.slices > 1 else "simt"
    if p.family == "wgmma":
        if p.single:
            return "wgmma one 128x64 tile per CTA"
        if p.ksplit:
            return "wgmma K-split warpgroups"
        if p.slices > 1:
            return "wgmma split-K"
        base = "wgmma persistent pairs" if p.persistent and p.cluster == 2 else "wgmma one CTA a tile"
        return base + (f" {p.tile[1]}-wide") + (" swapped" if p.swap else "")
    if p.family == "tf32x3":
        return "tf32x3" + (" split-K" if p.slices > 1 else "") + (" swapped" if p.swap else "")
    if p.family == "fp16x3":
        return "fp16x3" + (" split-K" if p.slices > 1 else "") + (" N-major split" if p.b.prep == "n-major split"
                                                                   else "")
    raise AssertionError(f"unknown family in {p}")


def full_tiles(p, M: int, N: int) -> bool:
    """Whether the kernel's output (C^T's where the plan swaps the operands) is whole tiles."""
    rows, cols = (N, M) if p.swap else (M, N)
    return rows % p.tile[0] == 0 and cols % p.tile[1] == 0
