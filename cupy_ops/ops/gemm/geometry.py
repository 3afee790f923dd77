"""The geometry the GEMM kernels and their plans agree on, defined once: it reaches the CUDA
sources as -D defines (``DEFINES`` for gemm.cu, ``SM90A_DEFINES`` for gemm_sm90a.cu,
``TRANSPOSE_DEFINES`` for transpose.cu); each kernel derives its internal layout (pipeline
stages, ...) from these and checks at compile time that they fit. How each number was chosen:
docs/gemm.md.
"""

from __future__ import annotations

import torch

from ...launch import EPI_ARGS_BYTES, EPI_PTRS, EPI_SCALARS

# --- SIMT (gemm_simt.cuh): the tiled fp32 CUDA-core kernel ----------------------------------
SIMT_TILE = 128  # block tile, M and N
SIMT_THREADS = 256  # 16 x 16 threads, 8 x 8 outputs each
SIMT_BK = 16  # k-tile (docs/gemm.md#simt)
SIMT_PAD = 4  # floats of padding per shared-memory tile row: the transposing stores hit distinct banks
# two buffers of the A and B k-tiles (SIMT_BK rows of SIMT_TILE + SIMT_PAD floats); passed as
# dynamic shared memory by the variants that take it so (tables.SIMT_OCCUPANCY)
SIMT_SMEM_BYTES = 2 * 2 * SIMT_BK * (SIMT_TILE + SIMT_PAD) * 4

# --- tc (gemm_tc.cuh): mma.sync, sm_80+ ------------------------------------------------------
TC_TILE = 128  # block tile, M and N
TC_THREADS = 128  # 4 warps of 64 x 64
TC_SMEM_BYTES = 61440  # 3 cp.async stages of (128 + 128) rows x 80 bytes (docs/gemm.md#tc)

# --- wgmma (gemm_wgmma.cuh): Hopper, wgmma + TMA ---------------------------------------------
WG_BM = 128  # block tile: 128 x BN
WG_THREADS = 384  # 3 warpgroups: producer + 2 consumers
WG_TILE_NS = (64, 128, 256)  # compiled tile widths BN (64: clusters of 1 only)
# the epilogue's staging buffers, 4 KB per consumer warp (docs/gemm.md#staged-epilogue)
WG_EPI_BYTES = 8 * 4096
# a ring of 192 KB of stages (4 x 48 KB at BN = 256, 6 x 32 KB at BN = 128, 7 x 24 KB at BN =
# 64), 16 bytes of mbarriers per stage, 1 KB of alignment slack, then the epilogue's buffers;
# the kernel derives its stage count from this budget
WG_SMEM_BYTES = 192 * 1024 + 6 * 16 + 1024 + WG_EPI_BYTES
# the TMA store box of C: a consumer warp's 16 rows of the accumulator fragment x 128 bytes
# (the swizzle's width), two boxes per warp buffer (docs/gemm.md#tma-stores)
WG_STORE_ROWS = 16
# the swapped TF32 kernel (gemm_wgmma_swap): B's and C's boxes of 32 x 32 fp32 (128 bytes by
# 32 rows: the k-tile for B, one epilogue round of C)
WG_SWAP_BOX = 32
# the K-splitting kernel's tile height (WG_KSPLIT_BM x 128, the two consumer warpgroups each over
# half of every k-tile) and the one-tile-per-CTA kernels' shared memory: all a block may have on
# compute capability 9.0 (227 KB), 9 ring stages of 24 KB with the epilogue staged in the ring,
# idle by then (docs/gemm.md#one-tile-per-cta)
WG_KSPLIT_BM = 64
WG_KSPLIT_TILE_NS = (64, 128)  # ... and its compiled tile widths (64: outputs of one wave of them)
WG_KSPLIT_SMEM_BYTES = 227 * 1024
WG_BK = {torch.bfloat16: 64, torch.float16: 64, torch.float32: 32}  # 128 bytes of K per tile row

# --- tf32x3 / fp16x3 (gemm_tf32x3.cuh, gemm_fp16x3.cuh): fp32 accuracy on the tensor cores ---
# all a block may have on compute capability 9.0: tf32x3 5 stages of A + B (32 KB each) and its
# X3_LO = 3 slots of b_lo (16 KB each) at BN = 128; the kernels derive their counts from this budget
X3_SMEM_BYTES = 227 * 1024
# the one tile width: each consumer holds the running and the k-tile's partial sums (promotion),
# 2 x BN / 2 registers, which leaves no room for 256
X3_TILE_NS = (128,)
# tf32x3_split_a (A split by a pass, gemm_tf32x3_pre): a thread a 16-byte group of a row
X3_PRESPLIT_THREADS = 256
# fp16x3_split: one block of X3H_SPLIT_THREADS per operand row, each thread holding
# X3H_SPLIT_VECS float4 of it in registers: rows up to 4096 wide read once, the rest of a longer
# row again from L2; seven blocks an SM keep more of the rows in flight than three of 512 threads
# holding 8192 (H200: 4096^2 49.4 against 51.9 us, the layer's 186.2 against 200.7; docs/gemm.md#fp16x3-split)
X3H_SPLIT_THREADS = 128
X3H_SPLIT_VECS = 8
# fp16x3_split_ring<threads, ring rows> (a persistent grid): rows of at most K values (the first
# entry that holds them) in a ring of whole rows in shared memory a block, the next rows' bulk
# copies in flight under a row's split; longer rows take fp16x3_split. H200 against
# fp16x3_split: 4096^2 50.2 -> 43.1 us; 8192-wide rows (the level2/63 layer's weight) slower at
# every <threads, rows> to <512, 2>: 160-164 against 151 us at 8192^2 (docs/gemm.md#fp16x3-split)
X3H_RINGS = ((4096, 128, 2),)
# fp16x3_colmax_n / fp16x3_split_n (a row-major b split N-major in place): blocks of
# X3H_NSPLIT_THREADS threads, 4 columns each, over chunks of X3H_COLMAX_ROWS / X3H_NSPLIT_ROWS rows
# (H200, t of the level2/63 layer's x, 1024 x 8192: 8 rows 26.6 us, 16 rows 21.8, 32 rows 29.3)
X3H_NSPLIT_THREADS, X3H_COLMAX_ROWS, X3H_NSPLIT_ROWS = 256, 16, 8
# fp16x3_rowcolmax<J> (t of a row-major b's rows and its columns' keys in one read): a block of
# up to X3H_ROWCOL_THREADS holds whole rows, J float4 of a row a thread, X3H_ROWCOL_VECS float4 a
# thread in registers: a step's rows and the next step's, loading under it (half each; 4096^2
# 37.7-38.7 -> 34.8-35.1 us, bit for bit, H200, a9de008); rows of up to 4 max(X3H_ROWCOL_JS)
# X3H_ROWCOL_THREADS values (wider: the two passes).
# X3H_ROWCOL_BLOCKS blocks an SM, one from J = X3H_ROWCOL_SOLO_J (its registers past two
# blocks' 64: NVRTC 12.1 spilled it capped there); rows a block from X3H_ROWCOL_STEPS steps to
# X3H_ROWCOL_SM_ROWS an SM at a time (H200, b 8192^2 at J = 4: 32 rows 82.8 us, 64 rows 78.7;
# 4096^2 at J = 2: 16 rows 28.3, 32 rows 31.3)
X3H_ROWCOL_THREADS, X3H_ROWCOL_VECS, X3H_ROWCOL_JS, X3H_ROWCOL_SOLO_J = 512, 8, (1, 2, 4), 4
X3H_ROWCOL_BLOCKS, X3H_ROWCOL_STEPS, X3H_ROWCOL_SM_ROWS = 2, 4, 64

# --- shared kernels --------------------------------------------------------------------------
TRANSPOSE_TILE, TRANSPOSE_ROWS = 32, 8  # transpose.cu: tile, block 32 x 8
NAIVE_BLOCK = (16, 16, 1)
# the naive kernel sums K in runs of NAIVE_CHUNK products, then the runs: its rounding error
# grows as K / NAIVE_CHUNK + NAIVE_CHUNK instead of K (a gradient summed over 250 rows, one of
# torch's matmul samples, erred 2.5x cuBLAS's summed in one run); K <= NAIVE_CHUNK: the same bits
NAIVE_CHUNK = 32
REDUCE_THREADS = 256  # gemm_splitk_reduce
# gemm_epilogue_after: AFTER_VECS 16-byte vectors of one row a thread (all loaded before the
# epilogue runs on any), AFTER_THREADS threads a block (the elementwise family's shape)
AFTER_THREADS, AFTER_VECS = 128, 2

# --- limits of the tiled kernels -------------------------------------------------------------
MAX_GRID_Y = 65535  # a grid's y (and z) dimension
MAX_GRID_Z = 65535  # a grid's z: the batched kernels' entries per launch
INT32_MAX = 2**31 - 1  # the tiled kernels take M, N, K as int (indices into them are 64-bit)

# the epilogue's argument (gemm_epilogue.cuh EpiArgs), its layout the launch layer's
EPI_DEFINES = {"EPI_PTRS": EPI_PTRS, "EPI_SCALARS": EPI_SCALARS, "EPI_ARGS_BYTES": EPI_ARGS_BYTES}
DEFINES = {
    **EPI_DEFINES,
    "SG_TILE": SIMT_TILE,
    "SG_THREADS": SIMT_THREADS,
    "SG_BK": SIMT_BK,
    "SG_PAD": SIMT_PAD,
    "SG_SMEM_BYTES": SIMT_SMEM_BYTES,
    "TC_TILE": TC_TILE,
    "TC_THREADS": TC_THREADS,
    "TC_SMEM_BYTES": TC_SMEM_BYTES,
    "NAIVE_CHUNK": NAIVE_CHUNK,
    "AFTER_VECS": AFTER_VECS,
}
SM90A_DEFINES = {
    **EPI_DEFINES,
    "WG_BM": WG_BM,
    "WG_THREADS": WG_THREADS,
    "WG_SMEM_BYTES": WG_SMEM_BYTES,
    "WG_EPI_BYTES": WG_EPI_BYTES,
    "WG_SWAP_BOX": WG_SWAP_BOX,
    "WG_KSPLIT_BM": WG_KSPLIT_BM,
    "WG_KSPLIT_SMEM_BYTES": WG_KSPLIT_SMEM_BYTES,
    "X3_SMEM_BYTES": X3_SMEM_BYTES,
    "X3H_SPLIT_THREADS": X3H_SPLIT_THREADS,
    "X3H_SPLIT_VECS": X3H_SPLIT_VECS,
    "X3H_NSPLIT_THREADS": X3H_NSPLIT_THREADS,
    "X3H_NSPLIT_ROWS": X3H_NSPLIT_ROWS,
    "X3H_COLMAX_ROWS": X3H_COLMAX_ROWS,
    "X3H_ROWCOL_THREADS": X3H_ROWCOL_THREADS,
    "X3H_ROWCOL_VECS": X3H_ROWCOL_VECS,
    "X3H_ROWCOL_SOLO_J": X3H_ROWCOL_SOLO_J,
    "X3H_ROWCOL_BLOCKS": X3H_ROWCOL_BLOCKS,
}
TRANSPOSE_DEFINES = {"TR_TILE": TRANSPOSE_TILE, "TR_ROWS": TRANSPOSE_ROWS}
