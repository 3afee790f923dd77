"""The one GEMM plan, for matmul and linear_relu_div alike.

``plan`` decides, for C (M, N) = epilogue(A (M, K) @ B (K, N)), the kernel family, its tile,
split-K, how each operand reaches the kernel (read in place, copied, transposed) and the
grid. The two ops differ only in their epilogue (``"EpiNone"``; ``"EpiBiasReluScale"``: bias,
ReLU, scale) and in their arguments: linear_relu_div's B is ``weight.T``.

Pure: it reads shapes, strides, alignment, the dtype and the device's properties (``Matrix``,
``Device``), never a tensor, so a CPU test can call it. ``cupy_ops/ops/gemm.py`` carries a
plan out. Adding a kernel family is one entry in ``FAMILIES`` (a ``supports`` reason and a
``plan`` function) and its kernels in ``cuda_src/gemm*.cu``.

The geometry a kernel and this plan must agree on is defined here once and reaches the CUDA
sources as -D defines (``DEFINES``, ``SM90A_DEFINES``); each kernel derives its internal
layout (pipeline stages, ...) from them and checks at compile time that they fit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import checks
from ..dtypes import CUDA_NAMES

EPILOGUES = ("EpiNone", "EpiBiasReluScale")

# --- geometry (-D defines of cuda_src/gemm.cu, gemm_sm90a.cu, transpose.cu) -------------------

SIMT_TILE = 128          # block tile of gemm_simt.cuh, M and N
SIMT_THREADS = 256       # 16 x 16 threads, 8 x 8 outputs each
SIMT_BK = 16             # k-tile: BK=16 ran 5 % faster than 8 (docs/tuning.md, SIMT run 1)
SIMT_PAD = 4             # floats of padding per shared-memory tile row: the transposing stores hit distinct banks
# Shared memory of gemm_simt.cuh: two buffers of the A and B k-tiles (SIMT_BK rows of
# SIMT_TILE + SIMT_PAD floats); passed as dynamic shared memory by the variants that take it so.
SIMT_SMEM_BYTES = 2 * 2 * SIMT_BK * (SIMT_TILE + SIMT_PAD) * 4
TC_TILE = 128            # block tile of gemm_tc.cuh, M and N
TC_THREADS = 128         # 4 warps of 64 x 64
TC_SMEM_BYTES = 61440    # 3 cp.async stages of (128 + 128) rows x 80 bytes (docs/tuning.md, tc run 4)
WG_BM = 128              # block tile of gemm_wgmma.cuh: 128 x BN
WG_THREADS = 384         # 3 warpgroups: producer + 2 consumers
WG_TILE_NS = (64, 128, 256)  # compiled tile widths BN (64: clusters of 1 only, see variants)
# Shared memory of gemm_wgmma.cuh: a ring of 192 KB of stages (4 x 48 KB at BN = 256, 6 x 32 KB
# at BN = 128, 7 x 24 KB at BN = 64), 16 bytes of mbarriers per stage, 1 KB of alignment slack;
# the kernel derives its stage count from this budget. Then the epilogue's staging buffers,
# 4 KB per consumer warp: H100, session 6 (benchmarks/results/tune_wgmma_epilogue_h100_session6.log),
# bf16 4096^3 0.88x -> 0.97x torch, 2048^3 0.79x -> 0.99x against each thread storing its
# accumulator fragment directly (8 rows x 16 bytes per store instruction).
WG_EPI_BYTES = 8 * 4096
WG_SMEM_BYTES = 192 * 1024 + 6 * 16 + 1024 + WG_EPI_BYTES
# The TMA store box of C (tma_store plans): a consumer warp's 16 rows of the wgmma accumulator
# fragment x 128 bytes of columns (the 128-byte swizzle's width), two boxes per warp buffer.
# H100, session 7 (benchmarks/results/tune_wgmma_tma_store_h100_session7.log): against the
# threads' stores from the same buffers, fused bf16 layer 1024 x 8192 x 8192 0.96x -> 0.99x
# torch, matmul within 1 % (bf16 4096^3 0.98x both; a build without any epilogue ran no
# faster: probe_epilogue_waves_h100_session7.log).
WG_STORE_ROWS = 16
# The swapped TF32 kernel (gemm_wgmma_swap): B's and C's tensor maps in boxes of 32 x 32 fp32
# (128 bytes, the swizzle's width, by 32 rows: 32 values of K, the k-tile, for B; 32 rows of C
# per epilogue round).
WG_SWAP_BOX = 32
# Tiles of WG_KSPLIT_BM x 128 with the two consumer warpgroups each over half of every k-tile
# (gemm_wgmma_ksplit; not for the swapped TF32 kernel) where the table would pick 128 x 64
# tiles (as many CTAs, wgmmas twice as wide), or split K where K is at most
# WG_KSPLIT_MAX_KTILES k-tiles or the tiles are no fewer CTAs than the split's (no workspace,
# one launch). H100, session 9 (benchmarks/results/probe_ksplit_h100_session9.log), against
# the table without it: bf16 1024^3 0.86x -> 0.91x torch, 1024x4096x1024 0.74x -> 0.91x,
# fused TF32 layer 1024^3 1.56x -> 1.82x; past a wave (1024x2048x1536, 192 CTAs;
# 2048x1024x1024, 256) it lost (0.88x -> 0.73x, 0.93x -> 0.75x): the table's 128-wide tiles
# there. Against split-K (probe_ksplit_splitk_h100_session9.log): it won at 32 k-tiles and
# fewer (fused TF32 256x1024x1024 1.14x -> 1.27x, 512x1024x1024 1.10x -> 1.42x, fused bf16
# 256x1024x1024 0.93x -> 1.34x, 64x2048x2048 0.99x -> 1.14x) and lost at 64 and more (bf16
# 128x4096x1024 2.12x -> 1.96x, 256x4096x512 0.80x -> 0.67x; TF32 128x4096x1024 1.32x -> 0.93x).
WG_KSPLIT_BM = 64
# Its shared memory: all a block may have on compute capability 9.0 (227 KB), for 9 ring stages
# of 24 KB (A 64 rows + B 128 columns x 128 bytes of K): one unit per CTA, so its epilogue stages
# in the ring, idle by then, instead of 32 KB of buffers of its own (7 stages). Its loads come
# from DRAM behind the flushed L2, and more stages keep more of them in flight. H100, session 16
# (benchmarks/results/probe_ksplit_smem_h100_session16.log and probes_rerun_h100_session16.log,
# builds timed in one process): 8 stages against 7 bf16 1024^3 +1.2 to +1.7 %, fp16 +1.6 to
# +2.0 %, 1024x4096x1024 +2.5 to +3.1 %, fused TF32 1024^3 +1.4 to +2.3 %; 9 against 8: +0.8 to
# +1.1 %, +1.1 to +1.3 %, +1.3 to +1.8 %, +0.7 to +1.6 %; against 7 at bf16 1024^3, 6 stages
# -0.5 % (1024x4096x1024 -5 %), 4 -11 %, 3 -23 %.
WG_KSPLIT_SMEM_BYTES = 227 * 1024
WG_KSPLIT_MAX_KTILES = 32
WG_KSPLIT = True
# Where the table takes the K-splitting kernel, 16-bit outputs of more than WG_KSPLIT_BM rows
# with K of at most WG_SINGLE_MAX_KTILES k-tiles take the plain kernel's 128 x 64 tiles instead,
# one per CTA with their epilogue staged in the ring (gemm_wgmma_single; the same budget, 9
# stages): no reduction of the two warpgroups' sums. H100, session 18: Nsight Compute
# (benchmarks/results/ncu_smem_bf16_h100_session18.txt) put cuBLAS's 1024^3 kernel (128 x 64
# tiles) ~700 cycles of SM time shorter than the K-splitting kernel, what its reduction takes
# (session 17's timeline), while reading more shared memory per k-tile. Sweep of 45 16-bit
# shapes the K split took (probe_ring_epi_sweep_h100_session18.log, two rounds, speed against
# it): at 8 and 16 k-tiles +1 to +10 % everywhere (bf16 1024^3 +1.1 / +2.3 %, fp16 +2.2 %, the
# fused bf16 layer 1024^3 +6 / +7 %, 256x1024x1024 +5 / +6 %) but M = 64 (+0.4 to +2 %); at 24
# +1.2 to +5.5 % but M = 64 (-2 to -8 %); at 32 -3 to +7 % (1024x2048x1024 -2.7 to +2.8 %); at
# 64 -7 to -10 %. TF32 (fused 1024^3, probe_ring_epi_h100_session18.log) lost 5-8 %: kept on
# the K split.
WG_SINGLE_MAX_KTILES = 24
WG_BK = {torch.bfloat16: 64, torch.float16: 64, torch.float32: 32}   # 128 bytes of K per tile row
# Shared memory of gemm_tf32x3.cuh: all a block may have on compute capability 9.0 (227 KB):
# 6 stages of A + B (32 KB each) and 2 slots of b_lo (16 KB each) at BN = 128. The kernel
# derives both counts from this budget.
X3_SMEM_BYTES = 227 * 1024
# Its one tile width: each consumer holds the running sum and the current k-tile's partial
# sum (promotion, see gemm_tf32x3.cuh), 2 x BN / 2 registers, which leaves no room for 256.
X3_TILE_NS = (128,)
# fp16x3_split (gemm_fp16x3.cuh): one block of X3H_SPLIT_THREADS per operand row, each thread
# holding X3H_SPLIT_VECS float4 of it in registers: rows up to 8192 wide are read once. H100,
# session 13 (benchmarks/results/probe_fp16x3_split_h100_session13.log), ms for 8192x8192 /
# 1024x8192 / 4096x4096 / 2048x32768: 512 x 4 0.184 / 0.028 / 0.051 / 0.256 (a copy of the same
# bytes 0.181 / 0.027 / 0.049 / 0.181), 256 x 8 0.188 / 0.030 / 0.050 / 0.277, 128 x 16 and
# 1024 x 2 0.21-0.34; session 12's warp per row, reading the row twice, 0.287 / 0.066 / 0.079 / 0.335.
X3H_SPLIT_THREADS = 512
X3H_SPLIT_VECS = 4
# fp16x3_colmax_n / fp16x3_split_n (matmul's row-major b, split N-major in place): blocks of
# X3H_NSPLIT_THREADS threads, 4 columns each, over chunks of X3H_COLMAX_ROWS / X3H_NSPLIT_ROWS
# rows. H100, session 13 (probe_fp16x3_split_h100_session13.log, run 3), ms for b 4096x4096 /
# 8192x8192 / 8192x1024 / 1024x8192 / 4096x256: 32 / 8 rows 0.087 / 0.300 / 0.059 / 0.051 /
# 0.030; 32 / 32 0.091 / 0.307 / 0.068 / 0.060 / 0.037; 64 / 8, 64 / 16 within 10 % of 32 / 32;
# 128 rows for the max 0.12 at 4096^2. The transpose pass + the row split it replaces: 0.107 /
# 0.400 / 0.055 / 0.077 (a copy of b: 0.049 / 0.181 / 0.027 / 0.027).
X3H_NSPLIT_THREADS, X3H_COLMAX_ROWS, X3H_NSPLIT_ROWS = 256, 32, 8
TRANSPOSE_TILE, TRANSPOSE_ROWS = 32, 8                              # transpose.cu: tile, block 32 x 8
NAIVE_BLOCK = (16, 16, 1)
REDUCE_THREADS = 256

DEFINES = {"SG_TILE": SIMT_TILE, "SG_THREADS": SIMT_THREADS, "SG_BK": SIMT_BK, "SG_PAD": SIMT_PAD,
           "SG_SMEM_BYTES": SIMT_SMEM_BYTES,
           "TC_TILE": TC_TILE, "TC_THREADS": TC_THREADS, "TC_SMEM_BYTES": TC_SMEM_BYTES}
SM90A_DEFINES = {"WG_BM": WG_BM, "WG_THREADS": WG_THREADS, "WG_SMEM_BYTES": WG_SMEM_BYTES, "WG_EPI_BYTES": WG_EPI_BYTES,
                 "WG_SWAP_BOX": WG_SWAP_BOX, "WG_KSPLIT_BM": WG_KSPLIT_BM, "WG_KSPLIT_SMEM_BYTES": WG_KSPLIT_SMEM_BYTES,
                 "X3_SMEM_BYTES": X3_SMEM_BYTES,
                 "X3H_SPLIT_THREADS": X3H_SPLIT_THREADS, "X3H_SPLIT_VECS": X3H_SPLIT_VECS,
                 "X3H_NSPLIT_THREADS": X3H_NSPLIT_THREADS, "X3H_NSPLIT_ROWS": X3H_NSPLIT_ROWS,
                 "X3H_COLMAX_ROWS": X3H_COLMAX_ROWS}
TRANSPOSE_DEFINES = {"TR_TILE": TRANSPOSE_TILE, "TR_ROWS": TRANSPOSE_ROWS}

# --- tuning tables (each cites the run that set it) ---------------------------------------

# Below this many waves of 128 x 256 blocks, 128 x 128 blocks are used. H200, run 7
# (benchmarks/results/tune_wgmma_h200_run7.log): at 0.24 waves (1024^3) 128-wide tiles ran
# 0.68x torch against 0.49x; from 0.97 waves (2048^3) on, 256-wide won (0.80x vs 0.74x).
WGMMA_WIDE_MIN_WAVES = 0.5
# Split the Hopper kernel's K only for outputs of at most a quarter wave of 128 x 128 tiles.
# H200, run 10 (benchmarks/results/tune_wgmma_h200_run10.log): 16 tiles (256x1024x1024)
# gained (bf16 linear 0.75x -> 0.96x torch, TF32 0.68x -> 1.15x); 64 tiles (1024^3, 2
# slices) lost (0.69x -> 0.58x): at ~10 us a call the workspace and second launch cost more.
WG_SPLIT_MAX_WAVES = 0.25
WG_SPLIT_MIN_KTILES = 8   # smallest K range (in k-tiles) a Hopper split-K slice gets
# 128 x 64 tiles below half a wave of 128 x 128 ones (above the split-K share). H100, session 6
# (benchmarks/results/tune_wgmma_small_h100_session6.log, CUDA-graph times alike): 1024^3 (64
# tiles) bf16 0.63x -> 0.75x torch, TF32 0.67x -> 0.75x; 1024 x 4096 x 1024 0.57x -> 0.71x;
# at 128 tiles (2048 x 1024 x 1024) 64-wide lost (0.75x -> 0.60x).
WG_NARROW_MAX_WAVES = 0.5
# The Hopper kernel's clusters: 2 CTAs (the pair shares each B tile, multicast by the TMA: a
# third less load traffic per CTA) run as a persistent grid, considered from
# WG_CLUSTER_MIN_WAVES waves of tiles on (where WG_WIDE_SPEEDS picks by whole waves); 1 below,
# one CTA per tile. H100, session 6 (benchmarks/results/
# tune_wgmma_persistent_h100_session6_run2.log, fragment-store epilogue): at 4096^3 bf16 /
# TF32 cluster 2 persistent 0.89x / 0.85x torch against 0.84x / 0.79x for 1 CTA per tile;
# at 1024^3 (0.48 waves of 128 x 128) 0.61x against 0.69x; clusters of 1 ran persistent
# 0.76x against 0.84x at 4096^3 (so persistent only with clusters). With the staged epilogue
# (tune_wgmma_epilogue_h100_session6.log) bf16 4096^3 0.97x against 0.92x, TF32 0.85x / 0.82x.
WG_CLUSTERS = (1, 2)
WG_CLUSTER_MIN_WAVES = 1.0
# From a wave of 128 x 256 tiles on, the tile width and cluster are chosen per shape by whole
# waves: (tile width, CTAs per cluster, speed per unit of output area at whole waves relative
# to the first), the one that finishes first wins, counting a last wave partly filled as a
# whole one (wgmma_wide). H100, session 7 (benchmarks/sweep_waves.py; bf16, K = 4096;
# benchmarks/results/sweep_waves_h100_session7.log): one CTA per 128 x 256 tile ran 0.92-0.98x
# the speed of persistent clusters of 2 at equal waves, 128 x 128 tiles in clusters of 2
# 0.85-0.87x; at 4224 x 4096 (5 waves of clusters against 4.0 of single CTAs) single CTAs ran
# 0.195 ms against 0.225, at 3072^2 (2.18 waves of 128 x 256 pairs) 128-wide pairs 0.141 ms
# against 0.151, at 2304 x 4096 0.144 against 0.155.
WG_WIDE_SPEEDS = ((256, 2, 1.0), (256, 1, 0.95), (128, 2, 0.85))
# Tile-walk group height in cluster rows (WgWalk): 8 and 4 within 1 % at 4096^3 and 8192^3
# (same runs).
WG_GROUP = 8
# The same for the 3xTF32 kernel (three times the work per tile, so splitting pays sooner).
# H100, session 5 (benchmarks/results/probe_tf32x3_h100_session5.log): 1024^3 (64 tiles, 0.48
# waves) split in 2 ran 0.0426 ms against 0.0584 unsplit (matmul; linear 0.0383 vs 0.0591);
# 256 x 1024 x 1024 (16 tiles) splits in 4 at 0.25 waves already.
X3_SPLIT_MAX_WAVES = 0.5
# fp32 at fp32 accuracy on Hopper tensor cores: fp16x3 (three fp16 products of row-scaled
# pieces, a split pass over both operands first) from this many multiply-adds (M N K) on,
# 3xTF32 below (fp16x3_or_tf32x3). H100, session 12 (benchmarks/probe_fp16x3.py, two runs,
# benchmarks/results/probe_fp16x3_h100_session12.log): 4096^3 and 1024 x 8192 x 8192 (2^36)
# fp16x3 1.51-1.57x / 1.10x the speed of 3xTF32 as matmul (b transposed first), 1.35-1.66x as
# the fused layer; 2048^3 (2^33) 1.40x as the layer but 1.32x / 0.86x as matmul; 1024^3 (2^30)
# 0.24-0.71x, 256 x 1024 x 1024 0.15-0.46x (the split pass, the transpose, split-K's workspace).
# Session 13 (the split read once, the warpgroups in turn; probe_fp16x3_h100_session13.log and
# _run2.log): 2^33 (2048^3) 1.03 / 1.07x before the turns, 1.41 / 1.57x after (matmul / layer);
# 2^32 (1024 x 2048 x 2048) 0.72 / 0.78x before, 1.13 / 1.35x after; 2^30 0.87x: from 2^33,
# where both runs had it faster (small shapes moved between runs with the host's launch costs).
X3H_MIN_WORK = 2**33
# The SIMT kernel's blocks per SM (the __launch_bounds__ minimum, on compute capability 9.0+;
# 2 caps registers at 128) and whether its tiles are dynamic shared memory, by (A K-major, B
# K-major, fused epilogue); split-K partial products and the layouts not listed: (1, False).
# At the 128-register cap ptxas schedules the fragment loads differently by how the tiles are
# declared, which made a 10 % difference. H100, session 10 (benchmarks/probe_simt.py,
# benchmarks/results/probe_simt_h100_session10.log, interleaved with torch): A K-major, B
# N-major (matmul's row-major b) 2 blocks dynamic 0.94x / 0.91x torch at 4096^3 /
# 1024x8192x8192, static 0.79x / 0.76x, 1 block 0.83-0.87x; B K-major (the nn.Linear
# weight) 2 blocks static 0.88x / 0.89x, dynamic 0.82x, 1 block 0.80-0.83x (dynamic the
# better), but NVRTC 13.5 spills at 2 blocks static without the fused epilogue (56 bytes).
# Through the plan, old table against this one (probe_simt_layouts_h100_session10.log): matmul
# 4096^3 3.13 -> 2.87 ms, with the fused epilogue (b N-major) 3.16 -> 3.10 ms, both K-major
# without it 3.33 -> 3.26 ms. An M-major A (a transposed view; probe_simt.py --a-m-major, runs
# 7-8 of the same log) at 1 block static / 2 blocks static / 2 dynamic: N-major B 0.85x /
# 0.94x / 0.86x (with the fused epilogue 0.85x / 0.96x / 0.96x), K-major B 0.87x / 0.76x /
# 0.92x (fused 0.88x / 0.88x / 0.87x: left at 1 block).
SIMT_OCCUPANCY = {(True, False, False): (2, True), (True, False, True): (2, True),
                  (True, True, True): (2, False), (True, True, False): (1, True),
                  (False, False, False): (2, False), (False, False, True): (2, False),
                  (False, True, False): (2, True)}


def fp16x3_or_tf32x3(M: int, N: int, K: int) -> str:
    """The faster of the two fp32-accurate tensor-core families for an M x K x N GEMM
    (X3H_MIN_WORK): "fp16x3" for large products, "tf32x3" for small ones."""
    return "fp16x3" if M * N * K >= X3H_MIN_WORK else "tf32x3"


def simt_occupancy(a_kmajor: bool, b_kmajor: bool, fused: bool, split: bool) -> tuple[int, bool]:
    """``(blocks per SM, tiles in dynamic shared memory)`` of a SIMT kernel (SIMT_OCCUPANCY)."""
    return (1, False) if split else SIMT_OCCUPANCY.get((a_kmajor, b_kmajor, fused), (1, False))


def simt_kernel(a_kmajor: bool, b_kmajor: bool, epi: str, split: bool) -> tuple[str, int]:
    """The SIMT kernel's instantiation for these layouts and epilogue, and the dynamic shared
    memory its launch passes."""
    blocks, dyn = simt_occupancy(a_kmajor, b_kmajor, epi != "EpiNone", split)
    return (f"gemm_simt<{_tf(a_kmajor)}, {_tf(b_kmajor)}, {epi}, {_tf(split)}, {blocks}, {_tf(dyn)}>",
            SIMT_SMEM_BYTES if dyn else 0)


# Smallest K a SIMT split-K slice gets. H200, run 9 (benchmarks/results/tune_simt_h200_runs8-9.log):
# fp32 1024^3 0.54x -> 1.04x torch, linear 256x1024x1024 0.39x -> 1.70x.
SIMT_SPLIT_MIN_K = 128
MAX_ROW_TILES = 65535     # the grid's y dimension holds the row tiles
INT32_MAX = 2**31 - 1     # the tiled kernels take M, N, K as int (indices into them are 64-bit)

TENSOR_CORE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@dataclass(frozen=True)
class Matrix:
    """A matrix operand as the plan sees it: shape, element strides, element size and whether
    its first element sits on a 16-byte boundary."""

    rows: int
    cols: int
    stride0: int
    stride1: int
    itemsize: int
    aligned16: bool

    @classmethod
    def of(cls, t: torch.Tensor) -> "Matrix":
        return cls(t.shape[0], t.shape[1], t.stride(0), t.stride(1), t.element_size(), t.data_ptr() % 16 == 0)

    @property
    def T(self) -> "Matrix":
        return Matrix(self.cols, self.rows, self.stride1, self.stride0, self.itemsize, self.aligned16)


def runs_sm90a(capability: tuple[int, int]) -> bool:
    """sm_90a code (wgmma, TMA, setmaxnreg) runs on compute capability 9.0 exactly."""
    return tuple(capability) == (9, 0)


@dataclass(frozen=True)
class Device:
    """What the plan needs of the GPU: its index, SM count and compute capability."""

    index: int
    sm_count: int
    capability: tuple[int, int]

    @property
    def has_wgmma(self) -> bool:
        """The Hopper kernels ("wgmma", "tf32x3", "fp16x3") run here (``runs_sm90a``)."""
        return runs_sm90a(self.capability)


@dataclass(frozen=True)
class Operand:
    """How one operand reaches the kernel.

    ``prep``: ``"as is"`` (read in place), ``"contiguous copy"`` (row-major copy, SIMT),
    ``"k-major copy"`` / ``"transpose"`` (into K-major rows of 16-byte pitch for the tensor
    cores; ``"transpose"`` by the tiled kernel of transpose.cu), ``"n-major"`` (the Hopper
    kernel reads a row-major B in place through the instruction's transpose bit), ``"n-major
    split"`` (fp16x3: a row-major B split in place into N-major fp16 pieces).
    ``kmajor``: the kernel reads it K-major; ``ld``: its leading dimension after ``prep``;
    ``vec``: 16-byte loads are allowed (SIMT).
    """

    prep: str
    kmajor: bool
    ld: int
    vec: bool = False


@dataclass(frozen=True)
class GemmPlan:
    """What ``cupy_ops.ops.gemm.run`` launches for one GEMM (see ``plan``)."""

    family: str                  # the kernel family: "naive", "simt", "tc", "wgmma", "tf32x3", "fp16x3"
    kernel: str                  # its name expression (cuda_src/gemm.cu or gemm_sm90a.cu)
    source: str                  # "gemm.cu" or "gemm_sm90a.cu"
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    a: Operand
    b: Operand
    tile: tuple[int, int]        # block tile (M, N); (1, 1) for the naive kernel
    slices: int = 1              # split-K: blocks per output tile, each over ``kslice`` of K
    kslice: int = 0
    reduce: str | None = None    # the split-K reduction (applies the epilogue)
    reduce_grid: tuple[int, int, int] = (1, 1, 1)
    bk: int = 0                  # Hopper kernel: K per tile (the TMA box)
    cluster: int = 1             # Hopper kernel: CTAs per cluster (2: a pair sharing the B tile)
    group: int = 1               # ... cluster rows per group of its tile walk (WgWalk)
    persistent: bool = False     # ... grid: the clusters that run at once (else one per unit)
    tma_store: bool = False      # ... epilogue: TMA stores of C (C's rows 16-byte aligned)
    swap: bool = False           # Hopper kernels: C^T = B^T A^T (fp32, row-major B): grid, tile and cluster are C^T's
    ksplit: bool = False         # ... the two consumer warpgroups over halves of K (tile WG_KSPLIT_BM x 128)
    single: bool = False         # ... one WG_BM x 64 tile per CTA, the epilogue staged in the ring (more stages)
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        split = f", split-K {self.slices} x {self.kslice}" if self.slices > 1 else ""
        if self.family == "wgmma":
            split += (f", {'persistent, ' if self.persistent else ''}cluster {self.cluster}, group {self.group}, "
                      f"{'TMA' if self.tma_store else 'thread'} stores{', C^T = B^T A^T' if self.swap else ''}"
                      f"{', K split between the warpgroups' if self.ksplit else ''}"
                      f"{', one tile per CTA, epilogue staged in the ring' if self.single else ''}")
        return (f"{self.family}: {self.kernel}, tile {self.tile[0]}x{self.tile[1]}, grid {self.grid}{split}; "
                f"a {self.a.prep}, b {self.b.prep}" + "".join(f"; {n}" for n in self.notes))


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tf(b: bool) -> str:
    return "true" if b else "false"


# --- family choice ------------------------------------------------------------------------

def unsupported(family: str, M: int, N: int, K: int, dtype: torch.dtype, dev: Device) -> str | None:
    """Why ``family`` cannot compute an (M x K) @ (K x N) GEMM of ``dtype`` on ``dev`` (None:
    it can). The naive kernel computes every size and index in 64-bit."""
    if family != "naive" and cdiv(M, SIMT_TILE) > MAX_ROW_TILES:
        return (f"takes at most {MAX_ROW_TILES * SIMT_TILE} rows (M), got {M}; use 'auto' (it takes the naive "
                f"kernel there) or 'naive'")
    for dim, size in (("N", N), ("K", K)):
        if family != "naive" and size > INT32_MAX:
            return (f"takes {dim} up to {INT32_MAX} (32-bit sizes), got {dim} = {size}; use 'auto' (it takes the "
                    f"naive kernel there) or 'naive'")
    if family == "simt" and dtype != torch.float32:
        return f"is the fp32 kernel; got {dtype} operands (use 'auto' or 'naive')"
    if family in ("tc", "wgmma") and dtype not in TENSOR_CORE_DTYPES:
        return f"takes float16, bfloat16 or float32 (TF32) operands, got {dtype}"
    if family == "tf32x3" and dtype != torch.float32:
        return f"is the fp32 kernel on TF32 tensor cores (three products); takes float32 operands, got {dtype}"
    if family == "fp16x3" and dtype != torch.float32:
        return f"is the fp32 kernel on fp16 tensor cores (three products); takes float32 operands, got {dtype}"
    if family in ("wgmma", "tf32x3", "fp16x3") and not dev.has_wgmma:
        return (f"needs a Hopper GPU (compute capability 9.0); cuda:{dev.index} has "
                f"{'.'.join(map(str, dev.capability))} (use 'auto' or "
                f"{'tc' if family == 'wgmma' else 'simt (fp32 on the CUDA cores)'})")
    return None


def choose(algo: str, M: int, N: int, K: int, dtype: torch.dtype, dev: Device, tf32: bool) -> str:
    """The kernel family for ``algo``. ``"auto"``: float16 / bfloat16 on the tensor cores
    ("wgmma" on Hopper, "tc" elsewhere); float32 the same only when torch itself would use TF32
    (``tf32``), else "simt" (full fp32); float64, or sizes the tiled kernels do not take
    (``unsupported``): "naive". "tf32x3" and "fp16x3" (fp32 accuracy on the tensor cores,
    Hopper) are taken only when asked for by name: "auto" follows torch's precision switches. Raises
    ``ValueError`` when an explicit ``algo`` cannot take the problem."""
    if algo != "auto":
        checks.fits("algo", algo, unsupported(algo, M, N, K, dtype, dev))
        return algo
    if dtype == torch.float64 or unsupported("simt", M, N, K, torch.float32, dev) is not None:
        return "naive"
    if dtype != torch.float32 or tf32:
        return "wgmma" if dev.has_wgmma else "tc"
    return "simt"


# --- the families -------------------------------------------------------------------------

def _naive(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, opts) -> GemmPlan:
    return GemmPlan("naive", f"gemm_naive<{CUDA_NAMES[dtype]}, {epi}>", "gemm.cu",
                    (cdiv(N, 16), max(1, min(cdiv(M, 16), 65535)), 1), NAIVE_BLOCK, 0,
                    Operand("as is", a.stride1 == 1, a.stride0), Operand("as is", b.stride0 == 1, b.stride1), (1, 1))


def simt_operand(t: Matrix) -> Operand:
    """A SIMT operand (rows, K-or-N) read along ``cols`` (K for A, N for B): contiguous along
    its columns (``kmajor`` for A / N-major for B), along its rows, or copied row-major."""
    if t.stride1 == 1 or t.cols == 1:
        major, ld, prep, aligned = True, t.stride0 if t.rows > 1 else t.cols, "as is", t.aligned16
    elif t.stride0 == 1 or t.rows == 1:
        major, ld, prep, aligned = False, t.stride1 if t.cols > 1 else t.rows, "as is", t.aligned16
    else:
        major, ld, prep, aligned = True, t.cols, "contiguous copy", True
    return Operand(prep, major, ld, aligned and ld % 4 == 0)


def simt_split(M: int, N: int, K: int, sm_count: int) -> tuple[int, int]:
    """``(slices, kslice)``: split-K when the 128 x 128 tiles leave SMs idle (one block per
    SM): ``slices`` blocks per tile each multiply ``kslice`` values of K (a multiple of the
    k-tile) into an fp32 workspace, summed in order by the reduction. ``(1, K)``: no split."""
    tiles = cdiv(M, SIMT_TILE) * cdiv(N, SIMT_TILE)
    slices = min(sm_count // tiles, K // SIMT_SPLIT_MIN_K)
    if slices < 2:
        return 1, K
    kslice = cdiv(cdiv(K, slices), SIMT_BK) * SIMT_BK
    return cdiv(K, kslice), kslice


def _simt(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, opts) -> GemmPlan:
    pa = simt_operand(a)
    pb_ = simt_operand(b)        # B (K, N): "major" = N-major (row-major)
    pb = Operand(pb_.prep, not pb_.kmajor, pb_.ld, pb_.vec)
    slices, kslice = simt_split(M, N, K, dev.sm_count) if opts.get("split_k", True) else (1, K)
    grid = (cdiv(N, SIMT_TILE), cdiv(M, SIMT_TILE), slices)
    block = (SIMT_THREADS, 1, 1)
    split = slices > 1
    kernel, smem = simt_kernel(pa.kmajor, pb.kmajor, "EpiNone" if split else epi, split)
    if split:
        return GemmPlan("simt", kernel, "gemm.cu", grid, block, smem, pa, pb, (SIMT_TILE, SIMT_TILE), slices, kslice,
                        f"gemm_splitk_reduce<float, {epi}>", _reduce_grid(M * N))
    return GemmPlan("simt", kernel, "gemm.cu", grid, block, smem, pa, pb, (SIMT_TILE, SIMT_TILE), 1, K)


def _reduce_grid(n: int) -> tuple[int, int, int]:
    return (max(1, min(cdiv(n, REDUCE_THREADS), 65535)), 1, 1)


def tc_operand(t: Matrix) -> Operand:
    """A tensor-core operand (rows, K): K contiguous, rows on 16-byte boundaries. Read in
    place when it is already so; a transposed view (K-major rows across memory) goes through
    the tiled transpose kernel (~2.5x faster than torch's copy of the view, run 7); any other
    view is copied. Copies pad rows to a multiple of 16 bytes."""
    es = t.itemsize
    ld = t.stride0 if t.rows > 1 else max(t.cols, 1)
    if (t.stride1 == 1 or t.cols == 1) and (ld * es) % 16 == 0 and t.aligned16:
        return Operand("as is", True, ld)
    kp = cdiv(max(t.cols, 1) * es, 16) * 16 // es
    if t.stride0 == 1 and t.rows > 1 and t.cols > 1:
        return Operand("transpose", True, kp)
    return Operand("k-major copy", True, kp)


def _tc(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, opts, notes=()) -> GemmPlan:
    return GemmPlan("tc", f"gemm_tc<{CUDA_NAMES[dtype]}, {epi}>", "gemm.cu", (cdiv(N, TC_TILE), cdiv(M, TC_TILE), 1),
                    (TC_THREADS, 1, 1), TC_SMEM_BYTES, tc_operand(a), tc_operand(b.T), (TC_TILE, TC_TILE),
                    notes=tuple(notes))


def wgmma_tile_n(M: int, N: int, sm_count: int) -> int:
    """Block-tile width: 256 (the fastest per block) unless that leaves fewer blocks than
    WGMMA_WIDE_MIN_WAVES x the SM count, then 128 (twice the blocks), or 64 where 128-wide
    blocks fill more than the split-K share (WG_SPLIT_MAX_WAVES) but less than
    WG_NARROW_MAX_WAVES of the SMs."""
    if cdiv(M, WG_BM) * cdiv(N, 256) >= WGMMA_WIDE_MIN_WAVES * sm_count:
        return 256
    blocks = cdiv(M, WG_BM) * cdiv(N, 128)
    return 64 if WG_SPLIT_MAX_WAVES * sm_count < blocks < WG_NARROW_MAX_WAVES * sm_count else 128


def wgmma_wide(M: int, N: int, sm_count: int) -> tuple[int, int] | None:
    """``(tile width, cluster)`` for outputs of at least WG_CLUSTER_MIN_WAVES waves of 128 x 256
    tiles (None below): the WG_WIDE_SPEEDS entry with the least time, taken as whole waves of
    its units (``cluster`` tiles) over the clusters that fit (``sm_count // cluster``) times
    the tile area over its speed. Clusters of 2 need two tile rows."""
    rows = cdiv(M, WG_BM)
    if rows * cdiv(N, 256) < WG_CLUSTER_MIN_WAVES * sm_count:
        return None
    best = None
    for bn, cluster, speed in WG_WIDE_SPEEDS:
        if cluster > 1 and rows == 1:
            continue
        waves = cdiv(wgmma_walk(M, N, bn, 1, cluster, sm_count)[1], sm_count // cluster)
        cost = waves * bn / 256 / speed
        if best is None or cost < best[0]:
            best = (cost, bn, cluster)
    return best[1], best[2]


def wgmma_split(M: int, N: int, K: int, bn: int, bk: int, sm_count: int,
                max_waves: float = WG_SPLIT_MAX_WAVES) -> tuple[int, int]:
    """``(slices, kslice)``: split-K for 128 x 128 tiles (``bn`` 128) that fill at most
    ``max_waves`` of the SMs; each slice at least WG_SPLIT_MIN_KTILES k-tiles."""
    if bn != 128:
        return 1, K
    tiles = cdiv(M, WG_BM) * cdiv(N, bn)
    if tiles > max_waves * sm_count:
        return 1, K
    slices = min(sm_count // tiles, K // (WG_SPLIT_MIN_KTILES * bk))
    if slices < 2:
        return 1, K
    kslice = cdiv(cdiv(K, slices), bk) * bk
    return cdiv(K, kslice), kslice


def wgmma_walk(M: int, N: int, bn: int, slices: int, cluster: int, sm_count: int) -> tuple[int, int]:
    """``(grid, units)`` of the Hopper kernel: ``units`` (clusters' work items: ``cluster``
    tiles of a column of one K slice) and a persistent grid of ``cluster`` CTAs per cluster,
    at most one cluster per unit and per ``cluster`` SMs (the runner lowers it to the clusters
    the device runs at once)."""
    units = cdiv(cdiv(M, WG_BM), cluster) * cdiv(N, bn) * slices
    return cluster * min(units, sm_count // cluster), units


def wgmma_tma_store(N: int, itemsize: int, slices: int, override: bool | None = None) -> bool:
    """Whether the Hopper kernel's epilogue stores C through the TMA: where a tensor map of
    C exists (its rows, N elements, a multiple of 16 bytes: C is a fresh contiguous tensor) and
    C is the output (split-K's partial products keep the threads' stores). ``override``
    False: the threads' stores (tuning); True where impossible: ValueError."""
    possible = slices == 1 and (N * itemsize) % 16 == 0
    if override and not possible:
        raise ValueError(f"tma_store=True needs C's rows a multiple of 16 bytes and no split-K; got N = {N} "
                         f"elements of {itemsize} bytes, {slices} K slices")
    return possible and override is not False


def wgmma_ksplits(M: int, N: int, K: int, bk: int, sm_count: int, split_k: bool = True) -> bool:
    """Whether the table takes the K-splitting warpgroups (gemm_wgmma_ksplit, WG_KSPLIT): where
    it would pick 128 x 64 tiles, or split K over 128 x 128 tiles where K is at most
    WG_KSPLIT_MAX_KTILES k-tiles or the split makes no more CTAs than WG_KSPLIT_BM x 128 tiles."""
    bn = wgmma_tile_n(M, N, sm_count)
    if bn == 64:
        return True
    slices = wgmma_split(M, N, K, bn, bk, sm_count)[0] if split_k else 1
    return slices > 1 and (cdiv(K, bk) <= WG_KSPLIT_MAX_KTILES or
                           cdiv(M, WG_KSPLIT_BM) * cdiv(N, 128) >= cdiv(M, WG_BM) * cdiv(N, bn) * slices)


def wgmma_singles(M: int, K: int, dtype: torch.dtype, bk: int) -> bool:
    """Whether the table takes one WG_BM x 64 tile per CTA (gemm_wgmma_single) where it would
    take the K-splitting warpgroups: 16-bit, more than WG_KSPLIT_BM rows, K of at most
    WG_SINGLE_MAX_KTILES k-tiles."""
    return dtype != torch.float32 and M > WG_KSPLIT_BM and cdiv(K, bk) <= WG_SINGLE_MAX_KTILES


def _wgmma_geometry(M: int, N: int, K: int, bk: int, dev: Device, opts) -> dict:
    """The Hopper kernel's tile width, split-K, cluster and grid for an M x N output (the
    kernel's: C^T's when it swaps the operands), from the tables or ``opts``' overrides."""
    # by whole waves where neither the tile width nor the cluster is overridden
    model = None if opts.get("tile_n") or opts.get("cluster") else wgmma_wide(M, N, dev.sm_count)
    bn = opts.get("tile_n") or (model[0] if model else wgmma_tile_n(M, N, dev.sm_count))
    slices, kslice = wgmma_split(M, N, K, bn, bk, dev.sm_count) if opts.get("split_k", True) else (1, K)
    tiles = cdiv(M, WG_BM) * cdiv(N, bn) * slices
    wide = tiles >= WG_CLUSTER_MIN_WAVES * dev.sm_count and bn >= 128 and cdiv(M, WG_BM) > 1
    cluster = opts.get("cluster") or (model[1] if model else 2 if wide else 1)
    if cluster * 64 > bn:
        raise ValueError(f"cluster={cluster} needs tile_n >= {cluster * 64} (each CTA loads whole 64-column boxes "
                         f"of B), got tile_n={bn}")
    persistent = opts.get("persistent")
    persistent = cluster > 1 if persistent is None else persistent
    grid, units = wgmma_walk(M, N, bn, slices, cluster, dev.sm_count)
    return dict(bn=bn, slices=slices, kslice=kslice, cluster=cluster, group=opts.get("group") or WG_GROUP,
                persistent=persistent, grid=(grid if persistent else cluster * units, 1, 1))


def wgmma_swaps(N: int, dtype: torch.dtype, b: Matrix, override: bool | None = None, c_map: bool = True) -> bool:
    """Whether a Hopper kernel computes C^T = B^T A^T (gemm_wgmma_swap, gemm_tf32x3_swap): for
    fp32 / TF32 with a row-major B (matmul's b), whose tiles TF32 wgmmas cannot read from
    shared memory (K-major only) but can take through registers; instead of a transpose pass
    over B. Needs B's rows 16-byte aligned (its tensor map) and, ``c_map`` (the wgmma kernel's
    epilogue stores through the TMA), C's. ``override`` False: the transpose pass (tuning,
    tests); True where impossible: ValueError."""
    possible = (dtype == torch.float32 and b.stride1 == 1 and b.aligned16 and (b.stride0 * b.itemsize) % 16 == 0
                and (not c_map or (N * b.itemsize) % 16 == 0))
    if override and not possible:
        raise ValueError(f"swap=True needs float32 operands, a row-major b with rows a multiple of 16 bytes apart "
                         f"from a 16-byte boundary{' and N a multiple of 4' if c_map else ''}; got {dtype}, b "
                         f"strides ({b.stride0}, {b.stride1}), N = {N}")
    return possible and override is not False


def n_major_in_place(b: Matrix) -> bool:
    """Whether a Hopper kernel reads B (K, N) N-major in place (16-bit wgmma operands through
    the instruction's transpose bit, fp16x3's pieces split from it): row-major, its rows on
    16-byte boundaries (the TMA's pitch and boxes, fp16x3_split_n's 16-byte loads)."""
    return b.stride1 == 1 and b.aligned16 and (b.stride0 * b.itemsize) % 16 == 0


def _wgmma(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, opts) -> GemmPlan:
    if K == 0:   # no tile to load: the mma.sync kernel writes epilogue(0)
        return _tc(M, N, K, dtype, a, b, epi, dev, opts, notes=("K == 0: the tc kernel writes the epilogue of 0",))
    T, bk = CUDA_NAMES[dtype], WG_BK[dtype]
    pa = tc_operand(a)
    if opts.get("swap") and opts.get("tma_store") is False:
        raise ValueError("swap=True with tma_store=False: the swapped kernel stores through the TMA only")
    if opts.get("swap") and opts.get("ksplit"):
        raise ValueError("swap=True with ksplit=True: the K-splitting kernel reads B K-major or 16-bit N-major")
    # (tma_store=False asks for the threads' stores, ksplit=True the K-splitting kernel: the
    # transpose pass then)
    swap = (wgmma_swaps(N, dtype, b, opts.get("swap")) and opts.get("tma_store") is not False
            and not opts.get("ksplit"))
    # C^T's geometry; where it splits K (small outputs), the transpose pass and the split-K
    # kernel instead, unless swap=True (then unsplit)
    geo = (_wgmma_geometry(N, M, K, bk, dev, dict(opts, split_k=opts.get("split_k", True) and not opts.get("swap")))
           if swap else None)
    if swap and geo["slices"] == 1:
        bn, cl = geo["bn"], geo["cluster"]
        return GemmPlan("wgmma", f"gemm_wgmma_swap<{bn}, {cl}, {epi}>", "gemm_sm90a.cu", geo["grid"],
                        (WG_THREADS, 1, 1), WG_SMEM_BYTES, pa, Operand("n-major", False, b.stride0), (WG_BM, bn),
                        kslice=K, bk=bk, cluster=cl, group=geo["group"], persistent=geo["persistent"],
                        tma_store=True, swap=True)
    # a row-major B (matmul's b) is read in place, N-major, through the instruction's
    # transpose bit (16-bit types; TF32 reads K-major only); any other B as (N, K) K-major
    if dtype != torch.float32 and n_major_in_place(b):
        pb, n_major = Operand("n-major", False, b.stride0), True
    else:
        pb, n_major = tc_operand(b.T), False
    ksplit, single = opts.get("ksplit"), opts.get("single")
    overridden = any(opts.get(o) is not None for o in ("tile_n", "cluster", "persistent"))
    if ksplit and overridden:
        raise ValueError("ksplit=True takes no tile_n, cluster or persistent override (its tile is "
                         f"{WG_KSPLIT_BM} x 128, one CTA each)")
    if single and (overridden or ksplit or dtype == torch.float32):
        got = ", ".join([str(dtype)] + [f"{o}={opts[o]!r}" for o in ("tile_n", "cluster", "persistent", "ksplit")
                                        if opts.get(o) is not None])
        raise ValueError(f"single=True takes 16-bit operands and no tile_n, cluster, persistent or ksplit=True "
                         f"override (its tile is {WG_BM} x 64, one CTA each); got {got}")
    small = ksplit is None and WG_KSPLIT and not overridden and wgmma_ksplits(M, N, K, bk, dev.sm_count,
                                                                              opts.get("split_k", True))
    tma_store = wgmma_tma_store(N, a.itemsize, 1, opts.get("tma_store"))
    if single or (single is None and small and wgmma_singles(M, K, dtype, bk)):
        return GemmPlan("wgmma", f"gemm_wgmma_single<{T}, {_tf(n_major)}, 64, {epi}>", "gemm_sm90a.cu",
                        (cdiv(M, WG_BM) * cdiv(N, 64), 1, 1), (WG_THREADS, 1, 1), WG_KSPLIT_SMEM_BYTES, pa, pb,
                        (WG_BM, 64), kslice=K, bk=bk, group=opts.get("group") or WG_GROUP, tma_store=tma_store,
                        single=True)
    if ksplit or small:
        units = cdiv(M, WG_KSPLIT_BM) * cdiv(N, 128)
        return GemmPlan("wgmma", f"gemm_wgmma_ksplit<{T}, {_tf(n_major)}, 128, {epi}>", "gemm_sm90a.cu",
                        (units, 1, 1), (WG_THREADS, 1, 1), WG_KSPLIT_SMEM_BYTES, pa, pb, (WG_KSPLIT_BM, 128), kslice=K,
                        bk=bk, group=opts.get("group") or WG_GROUP, tma_store=tma_store, ksplit=True)
    geo = _wgmma_geometry(M, N, K, bk, dev, opts)
    bn, cluster, slices = geo["bn"], geo["cluster"], geo["slices"]
    tma_store = wgmma_tma_store(N, a.itemsize, slices, opts.get("tma_store"))
    common = dict(grid=geo["grid"], block=(WG_THREADS, 1, 1), smem=WG_SMEM_BYTES, a=pa, b=pb, tile=(WG_BM, bn), bk=bk,
                  cluster=cluster, group=geo["group"], persistent=geo["persistent"])
    if slices > 1:
        return GemmPlan("wgmma", f"gemm_wgmma_partial<{T}, {_tf(n_major)}, {bn}, {cluster}>", "gemm_sm90a.cu",
                        slices=slices, kslice=geo["kslice"], reduce=f"gemm_splitk_reduce<{T}, {epi}>",
                        reduce_grid=_reduce_grid(M * N), **common)
    return GemmPlan("wgmma", f"gemm_wgmma<{T}, {_tf(n_major)}, {bn}, {cluster}, {epi}>", "gemm_sm90a.cu", kslice=K,
                    tma_store=tma_store, **common)


def _tf32x3(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, opts) -> GemmPlan:
    if K == 0:
        return _tc(M, N, K, dtype, a, b, epi, dev, opts, notes=("K == 0: the tc kernel writes the epilogue of 0",))
    if opts.get("tile_n") not in (None,) + X3_TILE_NS:   # an override this family cannot honour
        raise ValueError(f"tile_n must be one of {X3_TILE_NS} for algo='tf32x3', got {opts['tile_n']!r}")
    bk, bn = WG_BK[torch.float32], X3_TILE_NS[0]
    # TF32 reads shared memory K-major only: a row-major b as C^T = B^T A^T (B^T through the
    # registers, as the A fragments are anyway), else b.T transposed
    swap = wgmma_swaps(N, dtype, b, opts.get("swap"), c_map=False)
    pa, pb = tc_operand(a), Operand("n-major", False, b.stride0) if swap else tc_operand(b.T)
    kM, kN = (N, M) if swap else (M, N)   # the kernel's output: C^T when swapped
    slices, kslice = (wgmma_split(kM, kN, K, bn, bk, dev.sm_count, X3_SPLIT_MAX_WAVES) if opts.get("split_k", True)
                      else (1, K))
    common = dict(grid=(cdiv(kN, bn), cdiv(kM, WG_BM), slices), block=(WG_THREADS, 1, 1), smem=X3_SMEM_BYTES, a=pa,
                  b=pb, tile=(WG_BM, bn), bk=bk, swap=swap)
    name = "gemm_tf32x3_swap" if swap else "gemm_tf32x3"
    if slices > 1:
        return GemmPlan("tf32x3", f"{name}_partial<{bn}>", "gemm_sm90a.cu", slices=slices, kslice=kslice,
                        reduce=f"gemm_splitk_reduce<float, {epi}>", reduce_grid=_reduce_grid(M * N), **common)
    return GemmPlan("tf32x3", f"{name}<{bn}, {epi}>", "gemm_sm90a.cu", kslice=K, **common)


def _fp16x3(M, N, K, dtype, a: Matrix, b: Matrix, epi, dev, opts) -> GemmPlan:
    """Both operands through fp16x3_split (from their tensor-core form: K-major fp32 rows)
    into scaled fp16 pieces, then gemm_fp16x3 on 128 x 128 tiles, split-K as 3xTF32's."""
    if K == 0:
        return _tc(M, N, K, dtype, a, b, epi, dev, opts, notes=("K == 0: the tc kernel writes the epilogue of 0",))
    if opts.get("tile_n") not in (None,) + X3_TILE_NS:
        raise ValueError(f"tile_n must be one of {X3_TILE_NS} for algo='fp16x3', got {opts['tile_n']!r}")
    if opts.get("swap"):
        raise ValueError("swap=True: algo='fp16x3' reads both operands as K-major fp16 pieces (no swapped kernel)")
    bk, bn = WG_BK[torch.float16], X3_TILE_NS[0]
    slices, kslice = (wgmma_split(M, N, K, bn, bk, dev.sm_count, X3_SPLIT_MAX_WAVES) if opts.get("split_k", True)
                      else (1, K))
    # a row-major b (matmul's) split in place into N-major pieces, each column scaled
    # (fp16x3_split_n: no transpose pass), the kernel reading them through the wgmma's
    # transpose bit; any other b's columns as K-major rows (transposed or copied first)
    n_major = n_major_in_place(b)
    pb = Operand("n-major split", False, b.stride0) if n_major else tc_operand(b.T)
    split = ("fp16x3_split" if not n_major else "fp16x3_split, fp16x3_colmax_n + fp16x3_split_n")
    common = dict(grid=(cdiv(N, bn), cdiv(M, WG_BM), slices), block=(WG_THREADS, 1, 1), smem=X3_SMEM_BYTES,
                  a=tc_operand(a), b=pb, tile=(WG_BM, bn), bk=bk, notes=(f"operands split into fp16 pieces ({split})",))
    if slices > 1:
        return GemmPlan("fp16x3", f"gemm_fp16x3_partial<{bn}, {_tf(n_major)}>", "gemm_sm90a.cu", slices=slices,
                        kslice=kslice, reduce=f"gemm_splitk_reduce<float, {epi}>", reduce_grid=_reduce_grid(M * N),
                        **common)
    return GemmPlan("fp16x3", f"gemm_fp16x3<{bn}, {epi}, {_tf(n_major)}>", "gemm_sm90a.cu", kslice=K, **common)


FAMILIES = {"naive": _naive, "simt": _simt, "tc": _tc, "wgmma": _wgmma, "tf32x3": _tf32x3, "fp16x3": _fp16x3}
ALGOS = ("auto",) + tuple(FAMILIES)


def plan(M: int, N: int, K: int, dtype: torch.dtype, a: Matrix, b: Matrix, epilogue: str, dev: Device, *,
         algo: str = "auto", tf32: bool = False, tile_n: int | None = None, split_k: bool = True,
         cluster: int | None = None, group: int | None = None, persistent: bool | None = None,
         tma_store: bool | None = None, swap: bool | None = None, ksplit: bool | None = None,
         single: bool | None = None) -> GemmPlan:
    """The plan of C (M, N) = epilogue(A @ B) for A (``a``: M x K) and B (``b``: K x N) of
    ``dtype`` on ``dev`` (M, N > 0). ``algo`` picks the family (``choose``); ``tf32``: torch
    allows TF32 for fp32 matmuls now. ``tile_n`` (64, 128 or 256), ``split_k=False``,
    ``cluster`` (1 or 2), ``group`` (>= 1), ``persistent`` (False: one cluster per unit of
    work, the hardware scheduling them), ``tma_store`` (False: the threads store C), ``swap``
    (fp32 with a row-major b: False transposes b first, True computes C^T = B^T A^T even where
    split-K would be planned; ``wgmma_swaps``; also for tf32x3), ``ksplit`` (True: 64 x 128
    tiles, the consumer warpgroups over halves of K; False: never; ``wgmma_ksplits``) and
    ``single`` (True: 16-bit, one 128 x 64 tile per CTA, its epilogue staged in the ring; False:
    never; ``wgmma_singles``) override the Hopper kernels' tables (for tuning and tests).
    Raises ``ValueError`` when an explicit ``algo`` cannot take the problem or an override
    is out of range."""
    if epilogue not in EPILOGUES:
        raise ValueError(f"epilogue must be one of {EPILOGUES}, got {epilogue!r}")
    if tile_n is not None and tile_n not in WG_TILE_NS:
        raise ValueError(f"tile_n must be one of {WG_TILE_NS}, got {tile_n!r}")
    if cluster is not None and cluster not in WG_CLUSTERS:
        raise ValueError(f"cluster must be one of {WG_CLUSTERS}, got {cluster!r}")
    if group is not None and (not isinstance(group, int) or isinstance(group, bool) or group < 1):
        raise ValueError(f"group must be an int >= 1, got {group!r}")
    family = choose(algo, M, N, K, dtype, dev, tf32)
    return FAMILIES[family](M, N, K, dtype, a, b, epilogue, dev,
                            {"tile_n": tile_n, "split_k": split_k, "cluster": cluster, "group": group,
                             "persistent": persistent, "tma_store": tma_store, "swap": swap, "ksplit": ksplit,
                             "single": single})


def variants() -> dict[str, list[str]]:
    """Every kernel a plan can name, by source file (registered for the offline check)."""
    gemm, sm90a = [], []
    for T in CUDA_NAMES.values():
        gemm += [f"gemm_naive<{T}, {e}>" for e in EPILOGUES]
    for ak in (True, False):
        for bk_ in (True, False):
            gemm += [simt_kernel(ak, bk_, e, False)[0] for e in EPILOGUES] + [simt_kernel(ak, bk_, "EpiNone", True)[0]]
    for dt in TENSOR_CORE_DTYPES:
        T = CUDA_NAMES[dt]
        gemm += [f"gemm_tc<{T}, {e}>" for e in EPILOGUES] + [f"gemm_splitk_reduce<{T}, {e}>" for e in EPILOGUES]
        for n_major in ((False, True) if dt != torch.float32 else (False,)):
            for cl in WG_CLUSTERS:   # pairs share B tiles of at least 128 columns
                sm90a += [f"gemm_wgmma<{T}, {_tf(n_major)}, {bn}, {cl}, {e}>" for bn in WG_TILE_NS
                          for e in EPILOGUES if cl * 64 <= bn]
                sm90a.append(f"gemm_wgmma_partial<{T}, {_tf(n_major)}, 128, {cl}>")
            sm90a += [f"gemm_wgmma_ksplit<{T}, {_tf(n_major)}, 128, {e}>" for e in EPILOGUES]
            if dt != torch.float32:
                sm90a += [f"gemm_wgmma_single<{T}, {_tf(n_major)}, 64, {e}>" for e in EPILOGUES]
    sm90a += [f"gemm_wgmma_swap<{bn}, {cl}, {e}>" for bn in WG_TILE_NS for cl in WG_CLUSTERS for e in EPILOGUES
              if cl * 64 <= bn]
    for name in ("gemm_tf32x3", "gemm_tf32x3_swap"):
        sm90a += [f"{name}<{bn}, {e}>" for bn in X3_TILE_NS for e in EPILOGUES]
        sm90a += [f"{name}_partial<{bn}>" for bn in X3_TILE_NS]
    for nm in (False, True):
        sm90a += [f"gemm_fp16x3<{bn}, {e}, {_tf(nm)}>" for bn in X3_TILE_NS for e in EPILOGUES]
        sm90a += [f"gemm_fp16x3_partial<{bn}, {_tf(nm)}>" for bn in X3_TILE_NS]
    sm90a += ["fp16x3_split", "fp16x3_colmax_n", "fp16x3_split_n"]
    return {"gemm.cu": gemm, "gemm_sm90a.cu": sm90a}
