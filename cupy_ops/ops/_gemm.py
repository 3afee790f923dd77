"""Shared by the matrix ops (matmul, linear_relu_div): validation, operand layouts, algorithm
choice."""
from __future__ import annotations

import torch

from .. import launch
from ..kernel import Kernel

TRANSPOSE = Kernel.builtin("transpose.cu", "transpose")

ALGOS = ("auto", "naive", "simt", "tc", "wgmma")
SIMT_TILE = 128          # block tile of gemm_simt.cuh (M and N)
SIMT_THREADS = 256
SIMT_KTILES = (8, 16)    # compiled k-tile variants
SIMT_KTILE = 16          # the one used (tuning: notes/gemm_tuning.md)
TC_TILE = 128            # block tile of gemm_tc.cuh (M and N)
TC_THREADS = 128
TC_SMEM = 61440          # gemm_tc.cuh: 3 stages x (A + B tiles) x 128 rows x 80 bytes
TC_NAMES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "float"}
# Hopper kernel (gemm_wgmma.cuh): 128 x BN block tile, 3 warpgroups, a ring of ~192 KB
WG_BM, WG_THREADS = 128, 384
WG_TILE_NS = (128, 256)   # compiled block-tile widths
# Below this many waves of 128 x 256 blocks, 128 x 128 blocks are used instead. H200, run 7
# (notes/tune_wgmma_h200_run7.log): at 0.24 waves (1024^3) 128-wide tiles ran 0.68x torch
# against 0.49x for 256-wide; from 0.97 waves (2048^3) on, 256-wide won (0.80x vs 0.74x).
WGMMA_WIDE_MIN_WAVES = 0.5
WG_BK = {torch.bfloat16: 64, torch.float16: 64, torch.float32: 32}   # 128 bytes of K per tile row
_wgmma_devices: dict[int, bool] = {}


def check_algo(algo) -> str:
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {', '.join(map(repr, ALGOS))}, got {algo!r}")
    return algo


def check_matrix(name: str, t, ref_name: str | None = None, ref: torch.Tensor | None = None) -> None:
    """``t`` is a 2-D tensor of a supported dtype (and of ``ref``'s dtype when given)."""
    launch.check_tensor(name, t)
    if ref is not None:
        launch.check_same_dtype(name, t, ref_name, ref)
    if t.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor, got {t.dim()}-D with shape {tuple(t.shape)}")


def tf32_allowed() -> bool:
    """Whether torch would use TF32 for an fp32 matmul now (the same switches torch reads)."""
    return torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"


def has_wgmma(device: int) -> bool:
    """Whether ``device`` runs the sm_90a kernels (wgmma, TMA): compute capability 9.0 exactly
    (sm_90a code does not run on later architectures)."""
    ok = _wgmma_devices.get(device)
    if ok is None:
        ok = _wgmma_devices[device] = torch.cuda.get_device_capability(device) == (9, 0)
    return ok


def choose(algo: str, dtype: torch.dtype, M: int, device: int) -> str:
    """The kernel family for ``algo``: "auto" picks the fastest correct one available.

    "auto": float16 / bfloat16 -> tensor cores with fp32 accumulation: "wgmma" on Hopper
    (compute capability 9.0), "tc" (mma.sync, sm_80+) elsewhere; float32 -> the same tensor-core
    kernels reading TF32 only when torch itself would use TF32 (``tf32_allowed``), else "simt"
    (full fp32); float64, or more than 65535 tile rows -> "naive".
    Raises ``ValueError`` when an explicit ``algo`` cannot take ``dtype`` or this device.
    """
    if algo != "auto":
        if algo != "naive" and launch.cdiv(M, SIMT_TILE) > 65535:  # the grid's y dimension: row tiles
            raise ValueError(f"algo={algo!r} takes at most {65535 * SIMT_TILE} rows (M), got {M}; use 'auto' "
                             f"(it takes the naive kernel there) or 'naive'")
        if algo == "simt" and dtype != torch.float32:
            raise ValueError(f"algo='simt' is the fp32 kernel; got {dtype} operands (use 'auto' or 'naive')")
        if algo in ("tc", "wgmma") and dtype not in TC_NAMES:
            raise ValueError(f"algo={algo!r} takes float16, bfloat16 or float32 (TF32) operands, got {dtype}")
        if algo == "wgmma" and not has_wgmma(device):
            cc = ".".join(map(str, torch.cuda.get_device_capability(device)))
            raise ValueError(f"algo='wgmma' needs a Hopper GPU (compute capability 9.0); cuda:{device} has {cc} "
                             f"(use 'auto' or 'tc')")
        return algo
    if launch.cdiv(M, SIMT_TILE) > 65535 or dtype == torch.float64:
        return "naive"
    if dtype != torch.float32 or tf32_allowed():
        return "wgmma" if has_wgmma(device) else "tc"
    return "simt"


def operand(t: torch.Tensor, major_dim: int):
    """Layout of a matrix operand for the tiled kernels: ``(t, major, ld, vec)``.

    ``major`` is True when ``t`` is contiguous along dimension ``major_dim`` (then element
    (i, j) sits at ``i * ld + j`` if major_dim == 1, ``j * ld + i`` if major_dim == 0); False
    when contiguous along the other dimension. A view contiguous along neither is copied once
    (O(size) work next to the O(M N K) product). ``vec``: 16-byte loads are allowed.
    """
    other = 1 - major_dim
    if t.stride(major_dim) == 1 or t.shape[major_dim] == 1:
        major, ld = True, t.stride(other) if t.shape[other] > 1 else t.shape[major_dim]
    elif t.stride(other) == 1 or t.shape[other] == 1:
        major, ld = False, t.stride(major_dim) if t.shape[major_dim] > 1 else t.shape[other]
    else:  # row-major copy: contiguous along dimension 1
        t = t.contiguous()
        major, ld = major_dim == 1, t.stride(0)
    vec = t.data_ptr() % 16 == 0 and ld % 4 == 0
    return t, major, ld, vec


SIMT_SPLIT_MIN_K = 128   # smallest K range a split-K slice of the SIMT kernel gets


def simt_split(M: int, N: int, K: int, device: int) -> tuple[int, int]:
    """``(slices, kslice)``: split-K for the SIMT kernel when its 128 x 128 tiles leave SMs
    idle (one block per SM). Each of ``slices`` blocks per tile multiplies ``kslice`` values
    of K (a multiple of the k-tile) into an fp32 workspace, and a second kernel sums the slices
    in order (deterministic) and applies the epilogue. ``(1, K)``: no split."""
    tiles = launch.cdiv(M, SIMT_TILE) * launch.cdiv(N, SIMT_TILE)
    slices = min(sm_count(device) // tiles, K // SIMT_SPLIT_MIN_K)
    if slices < 2:
        return 1, K
    kslice = launch.cdiv(launch.cdiv(K, slices), SIMT_KTILE) * SIMT_KTILE
    return launch.cdiv(K, kslice), kslice


def simt_grid(M: int, N: int, slices: int = 1) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    return (launch.cdiv(N, SIMT_TILE), launch.cdiv(M, SIMT_TILE), slices), (SIMT_THREADS, 1, 1)


def reduce_grid(n: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Grid of the split-K reduction kernels (grid-stride loops, 256 threads)."""
    return (max(1, min(launch.cdiv(n, 256), 65535)), 1, 1), (256, 1, 1)


def bool_str(b: bool) -> str:
    return "true" if b else "false"


def tc_operand(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``t`` (rows, K) in the tensor-core kernels' form: K contiguous, each row starting on a
    16-byte boundary. Returns ``(tensor, leading dimension)``; copies (padding rows to a
    multiple of 16 bytes) only when ``t`` is not already in that form."""
    es = t.element_size()
    rows, k = t.shape
    ld = t.stride(0) if rows > 1 else max(k, 1)
    if (t.stride(1) == 1 or k == 1) and (ld * es) % 16 == 0 and t.data_ptr() % 16 == 0:
        return t, ld
    kp = -(-max(k, 1) * es // 16) * 16 // es
    buf = torch.empty((rows, kp), dtype=t.dtype, device=t.device)
    if t.stride(0) == 1 and rows > 1 and k > 1 and t.dtype in launch.DTYPE_NAMES:
        # a transposed view (e.g. matmul's row-major b seen as (N, K)): our tiled transpose,
        # ~2.5x faster than torch's copy_ of the view (notes/gemm_tuning.md, run 7)
        h = TRANSPOSE.handle(t.dtype, t.get_device())
        grid = (launch.cdiv(rows, 32), min(launch.cdiv(k, 32), 65535), 1)
        launch.launch(h, grid, (32, 8, 1), (t.data_ptr(), t.stride(1), buf.data_ptr(), kp, k, rows))
    else:
        buf[:, :k].copy_(t)
    if kp > k:
        # the kernel never uses the padding, but its last 16-byte copy of a row covers it:
        # zero it so no uninitialized memory is read (compute-sanitizer initcheck)
        buf[:, k:].zero_()
    return buf, kp


def wgmma_smem(bn: int) -> int:
    """Dynamic shared memory of gemm_wgmma.cuh for tile width ``bn`` (its WgRing<BN>::SMEM)."""
    stage = (WG_BM + bn) * 128
    stages = 192 * 1024 // stage
    return stages * stage + 2 * stages * 8 + 1024


def wgmma_tile_n(M: int, N: int, device: int) -> int:
    """Block-tile width for an (M, N) output: 256 (the fastest per block) unless that leaves
    fewer blocks than WGMMA_WIDE_MIN_WAVES x the SM count, then 128 (twice the blocks)."""
    blocks = launch.cdiv(M, WG_BM) * launch.cdiv(N, 256)
    return 256 if blocks >= WGMMA_WIDE_MIN_WAVES * sm_count(device) else 128


_sm_counts: dict[int, int] = {}


def sm_count(device: int) -> int:
    n = _sm_counts.get(device)
    if n is None:
        n = _sm_counts[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return n


WG_SPLIT_MIN_KTILES = 8   # smallest K range (in k-tiles) a split-K slice of the Hopper kernel gets
# Split only outputs of at most a quarter wave of 128 x 128 tiles. H200, run 10
# (notes/tune_wgmma_h200_run10.log): 16 tiles (256x1024x1024) gained (bf16 linear 0.75x ->
# 0.96x torch, TF32 0.68x -> 1.15x); 64 tiles (1024^3, 2 slices) lost (bf16 0.69x -> 0.58x):
# at ~10 us a call the workspace and the second launch cost more than the idle SMs.
WG_SPLIT_MAX_WAVES = 0.25


def wgmma_split(M: int, N: int, K: int, bn: int, dtype: torch.dtype, device: int) -> tuple[int, int]:
    """``(slices, kslice)``: split-K for the Hopper kernel when its 128 x 128 tiles (``bn``
    128) fill at most WG_SPLIT_MAX_WAVES of the SMs: ``slices`` blocks per tile each multiply
    ``kslice`` values of K (a multiple of the k-tile, at least WG_SPLIT_MIN_KTILES k-tiles)
    into an fp32 workspace, summed in order by the reduction kernel. ``(1, K)``: no split."""
    if bn != 128:
        return 1, K
    bk = WG_BK[dtype]
    tiles = launch.cdiv(M, WG_BM) * launch.cdiv(N, bn)
    if tiles > WG_SPLIT_MAX_WAVES * sm_count(device):
        return 1, K
    slices = min(sm_count(device) // tiles, K // (WG_SPLIT_MIN_KTILES * bk))
    if slices < 2:
        return 1, K
    kslice = launch.cdiv(launch.cdiv(K, slices), bk) * bk
    return launch.cdiv(K, kslice), kslice


def wgmma_grid(M: int, N: int, bn: int, slices: int = 1) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    return (launch.cdiv(N, bn), launch.cdiv(M, WG_BM), slices), (WG_THREADS, 1, 1)


def tc_grid(M: int, N: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    return (launch.cdiv(N, TC_TILE), launch.cdiv(M, TC_TILE), 1), (TC_THREADS, 1, 1)
