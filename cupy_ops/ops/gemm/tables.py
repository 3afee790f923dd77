"""The GEMM plan's tuning tables: the thresholds at which the families change tile, split,
cluster or kernel. Each entry was decided by a measurement recorded in docs/gemm.md (the
anchor beside it); the planners (the family modules) read them, nothing else.
"""

from __future__ import annotations

# --- SIMT ------------------------------------------------------------------------------------
# Blocks per SM (the __launch_bounds__ minimum on compute capability 9.0+; 2 caps registers at
# 128) and whether the tiles are dynamic shared memory, by (A K-major, B K-major, fused
# epilogue); split-K partial products and layouts not listed: (1, False). At the 128-register
# cap ptxas schedules the fragment loads by how the tiles are declared (docs/gemm.md#simt-occupancy).
SIMT_OCCUPANCY = {
    (True, False, False): (2, True),
    (True, False, True): (2, True),
    (True, True, True): (2, False),
    (True, True, False): (1, True),
    (False, False, False): (2, False),
    (False, False, True): (2, False),
    (False, True, False): (2, True),
}
SIMT_SPLIT_MIN_K = 128  # smallest K a SIMT split-K slice gets (docs/gemm.md#simt-split-k)

# --- wgmma: tile width, split-K, clusters ----------------------------------------------------
WGMMA_WIDE_MIN_WAVES = 0.5  # below this many waves of 128 x 256 tiles, 128-wide (docs/gemm.md#tile-width)
WG_SPLIT_MAX_WAVES = 0.25  # split K only for outputs of at most this many waves of 128 x 128 tiles
WG_SPLIT_MIN_KTILES = 8  # smallest K range (in k-tiles) a Hopper split-K slice gets (docs/gemm.md#split-k)
WG_NARROW_MAX_WAVES = 0.5  # 128 x 64 tiles below this where K is not split (docs/gemm.md#tile-width)
# TF32 with a row-major b (C^T = B^T A^T): K split from this many k-tiles on, where the unsplit
# K loop costs more than the split's second launch and workspace (~14 us of host a call, H200;
# docs/gemm.md#swap)
WG_SWAP_SPLIT_MIN_KTILES = 96
# Clusters of 2 CTAs sharing each B tile (TMA multicast) as a persistent grid, from
# WG_CLUSTER_MIN_WAVES waves of tiles on; one CTA per tile below (docs/gemm.md#clusters).
WG_CLUSTERS = (1, 2)
WG_CLUSTER_MIN_WAVES = 1.0
# From a wave of 128 x 256 tiles on, (tile width, CTAs per cluster, speed per unit of output
# area at whole waves relative to the first): the one that finishes first wins, a partly
# filled last wave counted whole (docs/gemm.md#whole-waves).
WG_WIDE_SPEEDS = ((256, 2, 1.0), (256, 1, 0.95), (128, 2, 0.85))
WG_GROUP = 8  # tile-walk group height in cluster rows (docs/gemm.md#whole-waves)
# The K-splitting warpgroups (64 x 128 tiles) where the table would take 128 x 64 tiles, or
# split K with at most WG_KSPLIT_MAX_KTILES k-tiles (docs/gemm.md#k-split-warpgroups).
WG_KSPLIT = True
WG_KSPLIT_MAX_KTILES = 32
# ... on 64 x 64 tiles for outputs of at most a wave of them with K of at most this many k-tiles,
# wherever no override asks otherwise (docs/gemm.md#narrow-k-split)
WG_KSPLIT_NARROW_MAX_KTILES = 32
# ... and there, 16-bit outputs of more than WG_KSPLIT_BM rows with K of at most this many
# k-tiles take one 128 x 64 tile per CTA instead (docs/gemm.md#one-tile-per-cta).
WG_SINGLE_MAX_KTILES = 24
# A b the batched kernel would copy K-major first: copied for entries of at most this many
# multiply-adds (M N K), above one 2-D GEMM per entry (H100, fcfcfc1: 32 x (1024x128x1024) 0.14x
# -> 0.70x torch copied; 8 x 2048^3 1.03x in a loop, 0.66x copied). TF32 with a row-major b is
# swapped entry by entry instead at any size (H200, d7f1399, 8da2dcb: 32 x (1024x128x1024) 1.13x torch,
# 0.71x copied; 16 x (2048x512x2048) 0.93x, 0.70x as a loop of 2-D swapped GEMMs).
WG_BATCH_MAX_WORK = 2**30

# --- fp32 accuracy on the tensor cores -------------------------------------------------------
X3_SPLIT_MAX_WAVES = 0.5  # tf32x3 / fp16x3 split K up to half a wave (docs/gemm.md#tf32x3)
# "accurate" on Hopper takes the x3 family the cost model finishes first (planner.x3_estimates,
# docs/gemm.md#fp16x3-or-tf32x3): each main loop at its multiply-adds per microsecond,
# or at X3_GEMM_SHARE of the card's memory bandwidth where its operands take longer to read,
# plus fp16x3's passes: its split (8 bytes an element: 4 read, 2 + 2 written) and t (4 read of
# the source operand) at X3H_SPLIT_SHARE of the bandwidth, and their launches' latency. Kernel
# times on an H200 (torch.profiler, 128x32768x32768 .. 8192^3, c52e3b6):
X3_MACS_PER_US = {"tf32x3": 4.8e7, "tf32x3 presplit": 5.42e7, "tf32x3 swap presplit": 6.3e7, "fp16x3": 1.15e8}
X3_GEMM_SHARE = 0.8
X3H_SPLIT_SHARE = 0.56
X3H_SPLIT_BYTES, X3H_T_BYTES = 8, 4
# the passes' launches (the workspace's memset, t, A's and B's splits), fixed costs at small sizes
X3H_PASSES_US = 30.0
X3H_PACKED_PASSES_US = 10.0  # B prepacked (docs/prepack.md): the memset and A's split
# tf32x3 with A split by a pass first (tf32x3.presplit_saves; "swap": C^T = B^T A^T, where A is
# the kernel's B side and its b_lo split goes entirely, 1.3-1.4x): the pass reads A and writes its hi
# and lo (X3_PRESPLIT_BYTES an element) at X3_PRESPLIT_SHARE of the bandwidth (its writes stay in
# L2 for the GEMM), after its launch. Fitted to H200 kernel times, A split in the registers
# against by the pass (tests/ops/gemm/test_planner.py MEASURED_PRESPLIT_H200, docs/gemm.md#tf32x3)
X3_PRESPLIT_BYTES = 12
X3_PRESPLIT_SHARE = 0.95
X3_PRESPLIT_US = 3.0
X3_DEFAULT_BANDWIDTH = 3.35e6  # bytes per microsecond where the driver does not say (an H100 SXM's)
# "accurate" over a batch: tf32x3 / fp16x3 have no batched kernel (one launch per entry), so
# entries of fewer multiply-adds than this take simt's batched kernel (full fp32) instead
# (H100, fcfcfc1: float32 32 x (1024x128x1024) tf32x3 0.30x torch, simt 0.96x; 8 x 2048^3
# fp16x3 2.28x, simt 0.85x)
X3_BATCH_MIN_WORK = 2**30

# --- a user epilogue by a pass after the GEMM -------------------------------------------------
# planner.after_estimates (docs/epilogues.md#after-the-gemm): at a Hopper kernel's store an
# epilogue costs EPI_SERIAL_NS a value, per SM, per instruction of its code that ends a straight
# line (runtime.serial_ops: ptxas then applies it one value at a time, tensor cores idle); by the
# pass EPI_PASS_SERIAL_NS, plus C's read and write (and its tensors' reads) at EPI_PASS_SHARE of
# the bandwidth, after its launch. Fitted to the layers of tests/ops/gemm/test_planner.py
# MEASURED_AFTER_H200 (1024 x 8192 x 8192: two Mish +106 us at the bf16 store, +26 by the pass)
EPI_SERIAL_NS = 0.5
EPI_PASS_SERIAL_NS = 0.1
EPI_PASS_SHARE = 0.8
EPI_PASS_US = 3.0
