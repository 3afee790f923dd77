// Hopper tensor-core GEMM (sm_90a only: wgmma + TMA), fp32 accumulation.
//
// C[m, n] = epi(sum_k A[m, k] * B[k, n], m, n) for bf16 / fp16 operands (m64n256k16) or fp32
// operands read as TF32 (m64n256k8). A is K-major (row-major (M, K)); B is K-major (stored
// (N, K), the nn.Linear weight layout) or, for 16-bit types, N-major (row-major (K, N), as
// matmul's b): the instruction's transpose bit reads it in place. Both come in through TMA
// tensor maps the host encodes (cupy_ops/ops/tma.py); the tensor map zero-fills the tile
// parts past M, N and K, so any shape works and the epilogue masks the stores.
//
// Block tile WG_BM (128) x BN x 128 bytes of K (BN = 256; 128 or 64 for grids too small to
// fill the GPU: the host picks, cupy_ops/ops/gemm_plan.py wgmma_tile_n), WG_THREADS (384: 3
// warpgroups), warp-specialized, registers moved by setmaxnreg from the producer to the
// consumers:
//   warpgroup 0: one thread issues the TMA loads of a ring of stages (as many as the host's
//     shared-memory budget WG_SMEM_BYTES holds after the epilogue buffers: 4 at BN = 256, 6
//     at BN = 128, 7 at BN = 64; with one unit per CTA, KSPLIT's 64-row tiles and SINGLE's
//     128 x 64 ones: 9 in WG_KSPLIT_SMEM_BYTES, the epilogue staged in the ring, idle by then);
//   warpgroups 1, 2: each owns 64 rows x BN columns (BN / 2 fp32 accumulators per thread)
//     and issues one wgmma per 16 (8 for TF32) values of K, keeping one k-tile of wgmmas in
//     flight while it waits for the next tile; then the epilogue, through a 4 KB
//     shared-memory buffer per warp: stored by the TMA where C has a tensor map
//     (wg_store_tile_tma), else by the threads in whole 16-byte row segments
//     (wg_store_tile_staged).
// Stages are handed over with mbarriers: full[s] (the TMA transaction count completes it),
// empty[s] (each consumer warp arrives once its wgmmas that read the stage are done).
// One kernel, two grids (gemm_wgmma_tiles): one CTA (cluster) per output tile, or persistent,
// a CTA per SM walking tiles (the ring runs on across tiles, so the next tile's loads overlap
// this one's epilogue); and clusters of 1 or 2 CTAs, a pair sharing each B tile by TMA
// multicast (each loads half). Shared memory: WG_SMEM_BYTES (dynamic: the host raises the
// kernel's limit). 128-byte swizzle on both sides (TMA writes it, the wgmma descriptors read
// it): conflict-free without padding.
// Three variants of the same skeleton (gemm_wgmma_tiles): SWAP, TF32 with a row-major B computed
// as C^T = B^T A^T, B^T through the wgmma's registers (SwapRows); for small outputs, one tile per
// CTA and a deeper ring: KSPLIT, 64-row tiles, the two consumer warpgroups each over half of
// every k-tile (kwg_reduce), and SINGLE, the plain kernel's tiles.
#pragma once
#include "common.cuh"
#include "gemm_epilogue.cuh"   // Cols, shfl_col: a column's parameters, read before the store
#include "wgmma_ops.cuh"

// WG_BM, WG_THREADS and WG_SMEM_BYTES come from the host (cupy_ops/ops/gemm_plan.py), which
// sizes the grid and the launch with them; the warp roles are written for 128 rows of 3 warpgroups.
#if !defined(WG_BM) || !defined(WG_THREADS) || !defined(WG_SMEM_BYTES) || !defined(WG_EPI_BYTES) || \
    !defined(WG_SWAP_BOX) || !defined(WG_KSPLIT_BM) || !defined(WG_KSPLIT_SMEM_BYTES)
#error "gemm_wgmma.cuh: the host passes WG_BM, WG_THREADS, WG_SMEM_BYTES, WG_EPI_BYTES, WG_SWAP_BOX, WG_KSPLIT_BM, WG_KSPLIT_SMEM_BYTES (-D)"
#endif
static_assert(WG_KSPLIT_BM == 64, "gemm_wgmma.cuh: KSPLIT's tile rows are one warpgroup's 64");
static_assert(WG_EPI_BYTES == 8 * 4096, "gemm_wgmma.cuh: one 4 KB epilogue chunk per consumer warp");
static_assert(WG_BM == 128 && WG_THREADS == 384, "gemm_wgmma.cuh: a producer and 2 consumer warpgroups of 64 rows");
#define WG_A_BYTES (WG_BM * 128)
// Register budgets after setmaxnreg (multiples of 8), for both Hopper kernels: 128 x 40 +
// 256 x 232 = 64512 of the SM's 65536, so both fit at one block per SM; the launch allocates
// 168 a thread (384 threads), which left the persistent kernel's 128 accumulators, its
// staging epilogue and its tile walk 8 bytes of spills.
#define WG_PRODUCER_REGS 40
#define WG_CONSUMER_REGS 232

// Ring geometry per tile width: stages of A (16 KB) + B (BN rows x 128 bytes), as many as the
// host's budget SMEM holds after the epilogue's buffers (EPI bytes, placed after the ring)
// and up to 1 KB lost aligning the ring to 1024 bytes (the 128-byte swizzle repeats every
// 1024 bytes; the descriptors assume that base), with 2 mbarriers (16 bytes) per stage.
// A_BYTES: the A tile's rows x 128 bytes (WG_BM rows; 64 for KSPLIT's tiles).
template <int BN, int A_BYTES = WG_A_BYTES, int SMEM = WG_SMEM_BYTES, int EPI = WG_EPI_BYTES> struct WgRing {
  static constexpr int B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int STAGES = (SMEM - EPI - 1024) / (STAGE_BYTES + 16);
  static_assert(STAGES >= 2, "gemm_wgmma.cuh: the shared-memory budget holds fewer than 2 stages");
};

// cuTensorMapEncodeTiled's opaque 128-byte CUtensorMap, passed by value as a __grid_constant__
// kernel parameter (the TMA unit reads it from parameter space).
struct __align__(64) TmaMap { u64 opaque[16]; };

template <class T> struct WgCfg;
template <> struct WgCfg<bf16> { static constexpr int BK = 64, KSTEP = 16; };
template <> struct WgCfg<f16> { static constexpr int BK = 64, KSTEP = 16; };
template <> struct WgCfg<float> { static constexpr int BK = 32, KSTEP = 8; };

__device__ __forceinline__ void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
// N pairs of ring mbarriers, 8 bytes apart: full[s] at full + 8 s (`full_arrivals`: the
// producer's arrive.expect_tx, then the TMA's bytes; or the warps that fill the slot) and
// empty[s] at empty + 8 s (`empty_arrivals`: one per consumer warp that reads it). The caller
// fences the inits (fence.mbarrier_init) once all of its barriers are set.
template <int N>
__device__ __forceinline__ void mbar_pairs_init(u32 full, u32 full_arrivals, u32 empty, u32 empty_arrivals) {
#pragma unroll
  for (int s = 0; s < N; ++s) {
    mbar_init(full + 8 * s, full_arrivals);
    mbar_init(empty + 8 * s, empty_arrivals);
  }
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the barrier's phase of this parity has completed. try_wait with a suspend-time
// hint (ns, an upper bound: the warp is woken when the phase completes): the waiting warp
// sleeps instead of spinning through issue slots the other warps need. Without it the 1024^3
// bf16 kernel executed 2.0M instructions against cuBLAS's 0.84M (Nsight Compute, H100); with
// it 1024^3 0.80x -> 0.85x torch in a scratch build, 0.79x -> 0.81x in an A/B of the landed
// kernel; larger shapes unchanged (docs/gemm.md#wait-hint).
#define WG_WAIT_HINT_NS 10000000u
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity), "n"(WG_WAIT_HINT_NS) : "memory");
  } while (!done);
}

// Fetches a tensor map into the TMA unit's descriptor cache ahead of its first use (the first
// load otherwise waits for it from memory).
__device__ __forceinline__ void tma_prefetch_map(const TmaMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}

// One TMA tile load: box at (c0 = innermost coordinate, c1) of the map -> shared memory at
// `dst`; completes `bar`'s transaction count by the box's bytes (zero-filled parts included).
__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaMap* map, int c0, int c1, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}

// The same from a 3-D map (a batch of matrices): box at (c0, c1) of matrix c2, one deep.
__device__ __forceinline__ void tma_load_3d(u32 dst, const TmaMap* map, int c0, int c1, int c2, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n"
      ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}

// wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading and
// stride byte offsets (each >> 4), layout type 1 (SWIZZLE_128B) in bits 62-63.
__device__ __forceinline__ u64 wg_desc(u32 addr, u32 lbo, u32 sbo) {
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins the accumulator registers at this point: the compiler sees them read and rewritten
// here, so it neither moves an ordinary read of them (the epilogue's) above a wgmma_wait nor
// a write (zeroing) below the next wgmma. Without it ptxas serialized the wgmmas of the fp32
// variants (warning C7514; TF32 4096^3 0.77x torch against 0.85x, H100).
template <int N> __device__ __forceinline__ void acc_fence(float* acc) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

// Two adjacent outputs (n, n + 1) of row `row`, values v0, v1 (the epilogue applied): one 4-
// or 8-byte store when both exist and the address is aligned for it (ldc even: C is a fresh
// torch tensor, 256-byte aligned).
template <class T>
__device__ __forceinline__ void store_pair(typename Traits<T>::Bits* row, int n, int N, bool paired, float v0,
                                           float v1) {
  typedef typename Traits<T>::Bits Bits;
  const Bits b0 = from_acc<T>(v0), b1 = from_acc<T>(v1);
  if (paired && n + 1 < N) {
    if constexpr (sizeof(Bits) == 2) {
      *reinterpret_cast<u32*>(row + n) = (u32)b0 | ((u32)b1 << 16);
    } else {
      struct __align__(8) Pair { u32 lo, hi; };
      *reinterpret_cast<Pair*>(row + n) = Pair{b0, b1};
    }
  } else {
    if (n < N) row[n] = b0;
    if (n + 1 < N) row[n + 1] = b1;
  }
}

// The epilogue's column parameters (the fused epilogue's bias) of a tile BN columns wide from
// column n0: each lane of a warp loads its share, two adjacent columns per word (word w of
// lane l: columns n0 + 2 (l + 32 w) + {0, 1}; past N: 0), all loads issued at once, ahead of
// the tile's last wgmma wait so their latency runs under it; epi_columns then hands each
// thread the columns of its fragment by shuffles. Loaded by each thread for its own columns,
// the 2 x 16 loads of a round were issued a few at a time, each batch waited on before the next
// (the accumulators leave ptxas no registers to keep more in flight): the fused epilogue took
// ~10 us per 128x256 tile, the fused bf16 layer 0.91x of the plain product (H100).
// A column's parameters are the epilogue's Col: its bias (a float), or every value a user
// epilogue reads of that column (Cols), all loaded here and none by apply.
template <int BN, class Col> struct EpiShare {
  static_assert(BN % 64 == 0, "whole words of 32 column pairs");
  static constexpr int WORDS = BN / 64;
  Col v[WORDS][2];
};
template <int BN, class Epi>
__device__ __forceinline__ void epi_load(EpiShare<BN, typename Epi::Col>& sh, const Epi& epi, int n0, int N, int lane) {
  typedef typename Epi::Col Col;
#pragma unroll
  for (int w = 0; w < EpiShare<BN, Col>::WORDS; ++w) {
    const int c = n0 + 2 * (lane + 32 * w);
    sh.v[w][0] = Epi::COLUMNS && c < N ? epi.column(c) : Col();
    sh.v[w][1] = Epi::COLUMNS && c + 1 < N ? epi.column(c + 1) : Col();
  }
}
// col[j][e]: the parameter of column 8 (j0 + j) + 2 t + e of the tile (t = lane % 4: the
// fragment's column pair), j < J: pair 4 (j0 + j) + t, word (j0 + j) / 8 of lane (4 (j0 + j) + t) % 32.
template <int J, int BN, class Epi>
__device__ __forceinline__ void epi_columns(typename Epi::Col (*col)[2], const EpiShare<BN, typename Epi::Col>& sh,
                                            int j0, int lane) {
  static_assert(J % 8 == 0, "whole words");
  const int t = lane & 3;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    if constexpr (Epi::COLUMNS) {
      col[j][0] = shfl_col(sh.v[(j0 + j) / 8][0], (4 * (j0 + j) + t) & 31);
      col[j][1] = shfl_col(sh.v[(j0 + j) / 8][1], (4 * (j0 + j) + t) & 31);
    } else {
      col[j][0] = col[j][1] = typename Epi::Col();
    }
  }
}

// The epilogue of one warpgroup's 64 x BN accumulator tile at (m0, n0) of C: epi applied to
// each value, stores masked to M x N. Accumulator 4 j + {0, 1}: row 16 warp + g, columns
// 8 j + 2 t + {0, 1}; 4 j + {2, 3}: the same columns of row + 8 (the wgmma D fragment layout).
template <class Out, int BN, class Epi>
__device__ __forceinline__ void wg_store_tile(const float* acc, typename Traits<Out>::Bits* __restrict__ C, i64 ldc,
                                              int M, int N, int m0, int n0, int warp, int lane, const Epi& epi) {
  typedef typename Traits<Out>::Bits Bits;
  static_assert(BN % 64 == 0, "whole rounds of 64 columns");
  const int g = lane >> 2, t = lane & 3;
  const bool paired = (ldc & 1) == 0;
  EpiShare<BN, typename Epi::Col> sh;
  epi_load<BN>(sh, epi, n0, N, lane);
#pragma unroll
  for (int r0 = 0; r0 < BN / 8; r0 += 8) {
    typename Epi::Col col[8][2];
    epi_columns<8, BN, Epi>(col, sh, r0, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + warp * 16 + g + 8 * h;
      if (m >= M) continue;
      Bits* row = C + (i64)m * ldc;
#pragma unroll
      for (int jl = 0; jl < 8; ++jl) {
        const int j = r0 + jl;
        const int n = n0 + 8 * j + 2 * t;
        store_pair<Out>(row, n, N, paired, epi.apply(acc[4 * j + 2 * h], col[jl][0], m, n),
                        epi.apply(acc[4 * j + 2 * h + 1], col[jl][1], m, n + 1));
      }
    }
  }
}

// The same epilogue through shared memory: warp w's 16 rows go, a chunk of 256 bytes of
// columns at a time, into its own 4 KB buffer `buf` (16 rows x 256 bytes, 16-byte units
// XOR-swizzled by row so the fragment's 4- and 8-byte writes do not share banks), then out as
// 16-byte row segments: each store instruction writes two whole 256-byte row pieces, where the
// fragment's own stores scatter 8 rows x 16 bytes. Rows or segments past M / N, and a C whose
// rows are not 16-byte aligned, go element by element. The buffer is the warp's alone:
// __syncwarp orders its writes and reads.
template <class Out, int BN, class Epi>
__device__ __forceinline__ void wg_store_tile_staged(const float* acc, typename Traits<Out>::Bits* __restrict__ C,
                                                     i64 ldc, int M, int N, int m0, int n0, int warp, int lane,
                                                     u32 buf, const Epi& epi,
                                                     const EpiShare<BN, typename Epi::Col>& sh) {
  typedef typename Traits<Out>::Bits Bits;
  constexpr int ES = (int)sizeof(Bits), PER16 = 16 / ES;                 // bytes, elements per 16-byte unit
  constexpr int CW = (256 / ES < BN) ? 256 / ES : BN, CHUNKS = BN / CW;  // columns per chunk, chunks
  constexpr int UNITS = CW * ES / 16;                                   // 16-byte units per chunk row
  const int g = lane >> 2, t = lane & 3;
  const bool vec = ((reinterpret_cast<u64>(C) | (u64)(ldc * ES)) & 15) == 0;
#pragma unroll
  for (int ch = 0; ch < CHUNKS; ++ch) {
    typename Epi::Col col[CW / 8][2];   // the chunk's columns' epilogue parameters, loaded before its stores
    epi_columns<CW / 8, BN, Epi>(col, sh, ch * (CW / 8), lane);
    __syncwarp();   // the previous chunk's reads are done
#pragma unroll
    for (int jl = 0; jl < CW / 8; ++jl) {
      const int j = ch * (CW / 8) + jl;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h, byte = (8 * jl + 2 * t) * ES;
        const u32 addr = buf + r * 256 + (((byte >> 4) ^ (r & 7)) << 4) + (byte & 15);
        const int m = m0 + warp * 16 + r, n = n0 + 8 * j + 2 * t;
        // (columns past N are computed but not stored)
        const Bits b0 = from_acc<Out>(epi.apply(acc[4 * j + 2 * h], col[jl][0], m, n));
        const Bits b1 = from_acc<Out>(epi.apply(acc[4 * j + 2 * h + 1], col[jl][1], m, n + 1));
        if constexpr (ES == 2) {
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"((u32)b0 | ((u32)b1 << 16)) : "memory");
        } else {
          asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(addr), "r"((u32)b0), "r"((u32)b1) : "memory");
        }
      }
    }
    __syncwarp();
#pragma unroll
    for (int it = 0; it < 16 * UNITS / 32; ++it) {   // 32 / UNITS rows per instruction
      const int idx = it * 32 + lane, r = idx / UNITS, u = idx % UNITS;
      u32 v0, v1, v2, v3;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3) : "r"(buf + r * 256 + ((u ^ (r & 7)) << 4)) : "memory");
      const int m = m0 + warp * 16 + r, n = n0 + ch * CW + u * PER16;
      if (m >= M || n >= N) continue;
      Bits* dst = C + (i64)m * ldc + n;
      if (vec && n + PER16 <= N) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(v0, v1, v2, v3);
      } else {
        const u32 w[4] = {v0, v1, v2, v3};
#pragma unroll
        for (int e = 0; e < PER16; ++e) {
          if (n + e < N) dst[e] = (Bits)(ES == 2 ? (w[e / 2] >> (16 * (e & 1))) : w[e]);
        }
      }
    }
  }
}

// --- TMA stores ------------------------------------------------------------------------------

// Stores the box at `src` (shared memory, the map's swizzle) to the map's box at (c0 =
// innermost coordinate, c1); the parts past the matrix are not written. The copy runs
// asynchronously, tracked in the issuing thread's bulk async-group.
__device__ __forceinline__ void tma_store_2d(const TmaMap* map, u32 src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
               ::"l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(src) : "memory");
}
// The same to a 3-D map's box at (c0, c1) of matrix c2 (a batch), one deep.
__device__ __forceinline__ void tma_store_3d(const TmaMap* map, u32 src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n"
               ::"l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(src) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// The issuing thread's committed stores, all but the latest `PENDING` groups, have read their
// shared memory (it may be rewritten).
template <int PENDING = 0> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(PENDING) : "memory");
}
// This thread's shared-memory writes are visible to the TMA unit (the async proxy).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// The epilogue through shared memory and TMA stores (C's rows 16-byte aligned: the host
// passes `cmap`, a tensor map of C with 16-row x 128-byte boxes and the 128-byte swizzle).
// Warp w's 16 rows (from `m0`) go out a box of 128 bytes of columns at a time, two boxes per
// round in its 4 KB buffer `buf` (1024-byte aligned), laid out as the TMA's swizzle expects:
// 16-byte unit u of row r at u ^ (r & 7), which also keeps the fragment's 4- and 8-byte
// writes conflict-free. Lane 0 hands each filled buffer to the TMA unit, which clips rows and
// columns past M and N, and the warp goes on (to the next round or the next tile's main
// loop); before the buffer is written again lane 0 waits until the TMA has read it.
template <class Out, int BN, class Epi>
__device__ __forceinline__ void wg_store_tile_tma(const float* acc, const TmaMap* cmap, int m0, int n0, int lane,
                                                  u32 buf, const Epi& epi,
                                                  const EpiShare<BN, typename Epi::Col>& sh) {
  typedef typename Traits<Out>::Bits Bits;
  constexpr int ES = (int)sizeof(Bits), BOXC = 128 / ES;   // bytes per element, columns per box
  constexpr int BOXES = BN / BOXC, PER_ROUND = BOXES < 2 ? BOXES : 2;
  static_assert(WG_EPI_BYTES / 8 == 2 * 2048, "two 16 x 128-byte boxes per consumer warp");
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int b0 = 0; b0 < BOXES; b0 += PER_ROUND) {
    typename Epi::Col col[PER_ROUND * BOXC / 8][2];   // the round's columns' epilogue parameters, before its stores
    epi_columns<PER_ROUND * BOXC / 8, BN, Epi>(col, sh, b0 * (BOXC / 8), lane);
    if (lane == 0) bulk_wait_read();   // the buffer's previous stores (this tile's or the last one's)
    __syncwarp();
#pragma unroll
    for (int bi = 0; bi < PER_ROUND; ++bi) {
#pragma unroll
      for (int jl = 0; jl < BOXC / 8; ++jl) {
        const int j = (b0 + bi) * (BOXC / 8) + jl;
        const typename Epi::Col* cj = col[bi * (BOXC / 8) + jl];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = g + 8 * h, byte = (8 * jl + 2 * t) * ES;
          const u32 addr = buf + bi * 2048 + r * 128 + (((byte >> 4) ^ (r & 7)) << 4) + (byte & 15);
          const int m = m0 + r, n = n0 + 8 * j + 2 * t;
          // (columns past N are computed; the TMA does not store them)
          const Bits b0v = from_acc<Out>(epi.apply(acc[4 * j + 2 * h], cj[0], m, n));
          const Bits b1v = from_acc<Out>(epi.apply(acc[4 * j + 2 * h + 1], cj[1], m, n + 1));
          if constexpr (ES == 2) {
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"((u32)b0v | ((u32)b1v << 16)) : "memory");
          } else {
            asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(addr), "r"((u32)b0v), "r"((u32)b1v) : "memory");
          }
        }
      }
    }
    fence_proxy_async();
    __syncwarp();
    if (lane == 0) {
#pragma unroll
      for (int bi = 0; bi < PER_ROUND; ++bi) tma_store_2d(cmap, buf + bi * 2048, n0 + (b0 + bi) * BOXC, m0);
      bulk_commit();
    }
  }
}

// --- swapped operands (TF32 with a row-major B) ----------------------------------------------
//
// TF32 wgmmas read shared memory K-major only, and matmul's B (K, N) is N-major: the kernel
// then computes C^T = B^T A^T (SWAP): its rows are C's columns, its A side B^T, loaded
// N-major by the TMA (boxes of 32 columns of C x 32 values of K, 128-byte swizzle) and moved
// into the wgmma's A registers by the consumers (a register operand may have any layout in
// shared memory), its B side A itself (K-major, as a K-major B). The output tile is stored
// transposed, through shared memory and the TMA. Without it, B went through a transpose pass
// first: ~10 % of TF32 4096^3 (docs/gemm.md#swap).
//
// Which C column n each accumulator row holds: any permutation will do (the epilogue stores
// by it), and this one makes the fragment loads conflict-free. Warp w's row g + 8 i (g = lane
// / 4, i = 0, 1) of warpgroup c is column 64 c + nloc of the tile, nloc = 32 (w / 2) + nb:
// box w / 2 of the warpgroup's two, column nb = 8 (w % 2) + 4 i + (g % 4) + 16 (g / 4) of
// the box, i.e. 16-byte unit nb / 4 = 2 (w % 2) + i + 4 (g / 4), word g % 4. A k-step's
// register q (i = q % 2, value of K 8 kk + t + 4 (q / 2), t = lane % 4) sits in swizzled unit
// (nb / 4) ^ (t + 4 (q / 2)): over the warp, units 0-7 (t picks the low two bits, g / 4 the
// third) x words 0-3, the 32 banks once each.
static_assert(WG_SWAP_BOX * 4 == 128 && WG_BM == 4 * WG_SWAP_BOX,
              "SWAP: boxes of 128 bytes (the swizzle's width) of fp32, a k-tile deep; 2 per consumer warpgroup");
#define WG_SWAP_BOX_BYTES (WG_SWAP_BOX * 128)
struct SwapRows {
  int nloc[2];   // the warpgroup-relative C column of this thread's rows g and g + 8
  u32 base;      // the thread's fragment offset in a stage's A tile, k-step 0, register 0
  u32 off[4];    // ... plus this for register q (k-step kk: + kk * 1024)
  __device__ __forceinline__ SwapRows(int c, int warp, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < 2; ++i) nloc[i] = 32 * (warp >> 1) + 8 * (warp & 1) + 4 * i + (g & 3) + 16 * (g >> 2);
    base = (u32)((2 * c + (warp >> 1)) * WG_SWAP_BOX_BYTES + t * 128 + (g & 3) * 4);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = q & 1, h = q >> 1;
      off[q] = (u32)(h * 512 + ((((2 * (warp & 1) + i) ^ t) + 4 * ((g >> 2) ^ h)) << 4));
    }
  }
  // The A fragments of a k-tile's BK / 8 k-steps from the stage's A tile at `a` (+ base).
  template <int KSTEPS> __device__ __forceinline__ void load(u32 (&fr)[KSTEPS][4], u32 a) const {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(fr[kk][q]) : "r"(a + kk * 1024 + off[q]) : "memory");
  }
};

// The 128 threads of consumer warpgroup c (named barrier 1 + c; 0 is __syncthreads').
__device__ __forceinline__ void warpgroup_sync(int c) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory");
}

// The swapped epilogue of warpgroup c's 64 x BN accumulator tile: kernel rows (C columns from
// n0, order SwapRows) x kernel columns (C rows from m0). rowp[i]: the epilogue parameter of row
// i's column (its bias). Rounds of 32 C rows: each thread writes its 16 values into one of two
// 8 KB buffers at `buf` (the warpgroup's 16 KB, 1024-byte aligned) as two TMA boxes of 32 C
// rows x 32 columns (128-byte swizzle: unit u of row r at u ^ (r % 8)), then one thread hands
// them to the TMA, which clips what lies past M and N. A buffer is rewritten once the TMA has
// read it (the issuer waits for all but the latest round, then the warpgroup syncs); the
// writes are two-way bank conflicted (the fragment's g / 4 and t / 2 select the same swizzle
// bit), 32 wavefronts a round. z >= 0: cmap is 3-D (a batch), the tile is matrix z's.
template <int BN, class Epi>
__device__ __forceinline__ void wg_store_tile_tma_swap(const float* acc, const TmaMap* cmap, int n0, int m0, int c,
                                                       int warp, int lane, u32 buf, const Epi& epi,
                                                       const SwapRows& rows, const typename Epi::Col (&rowp)[2],
                                                       int z = -1) {
  static_assert(BN % 64 == 0, "whole pairs of rounds (the buffers alternate; a tile leaves the first one next)");
  static_assert(WG_EPI_BYTES / 2 == 2 * 2 * WG_SWAP_BOX_BYTES, "two rounds' buffers per consumer warpgroup");
  const int t = lane & 3;
  const bool issuer = warp == 0 && lane == 0;
#pragma unroll
  for (int r = 0; r < BN / WG_SWAP_BOX; ++r) {
    const u32 b = buf + (r & 1) * 2 * WG_SWAP_BOX_BYTES;
    if (issuer) bulk_wait_read<1>();   // round r - 2's stores (or the last tile's) have read b
    warpgroup_sync(c);
#pragma unroll
    for (int jl = 0; jl < 4; ++jl) {
      const int j = 4 * r + jl;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int nb = rows.nloc[i] & 31;
        const u32 col = b + (rows.nloc[i] >> 5) * WG_SWAP_BOX_BYTES + (nb & 3) * 4;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int m = 8 * jl + 2 * t + e;   // the C row within the round
          const float v = epi.apply(acc[4 * j + 2 * i + e], rowp[i], m0 + WG_SWAP_BOX * r + m, n0 + rows.nloc[i]);
          asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(col + m * 128 + (((nb >> 2) ^ (m & 7)) << 4)), "f"(v)
                       : "memory");
        }
      }
    }
    fence_proxy_async();
    warpgroup_sync(c);
    if (issuer) {
      if (z >= 0) {
        tma_store_3d(cmap, b, n0, m0 + WG_SWAP_BOX * r, z);
        tma_store_3d(cmap, b + WG_SWAP_BOX_BYTES, n0 + WG_SWAP_BOX, m0 + WG_SWAP_BOX * r, z);
      } else {
        tma_store_2d(cmap, b, n0, m0 + WG_SWAP_BOX * r);
        tma_store_2d(cmap, b + WG_SWAP_BOX_BYTES, n0 + WG_SWAP_BOX, m0 + WG_SWAP_BOX * r);
      }
      bulk_commit();
    }
  }
}

// The swapped epilogue by the threads' own stores, for C^T's 64 x BN tile of a warpgroup at
// kernel (n0, m0): C[m][n] (ldc) = epi(value), masked to C's M rows (the kernel's N) and N
// columns (the kernel's M); nloc: the warpgroup-relative kernel rows of this thread's
// accumulator rows g and g + 8 (SwapRows order where the A fragments came N-major). Each store
// instruction writes 4 rows x two 16-byte runs of C (one 32-byte run K-major): fine where the
// main loop is long (the 3xTF32 kernel, its split-K slices).
template <class Out, int BN, class Epi>
__device__ __forceinline__ void wg_store_tile_t(const float* acc, typename Traits<Out>::Bits* __restrict__ C, i64 ldc,
                                                int kM, int kN, int n0, int m0, int lane, const int (&nloc)[2],
                                                const Epi& epi) {
  const int t = lane & 3;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int n = n0 + nloc[i];
    if (n >= kM) continue;
    const typename Epi::Col p = Epi::COLUMNS ? epi.column(n) : typename Epi::Col();
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int m = m0 + 8 * j + 2 * t + e;
        if (m < kN) C[(i64)m * ldc + n] = from_acc<Out>(epi.apply(acc[4 * j + 2 * i + e], p, m, n));
      }
    }
  }
}

// --- clusters (CM = 2: two CTAs on neighbouring SMs share each B tile) ---------------------

__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// The CTAs in this CTA's cluster (1 for a launch without clusters).
__device__ __forceinline__ u32 cluster_ctas() {
  u32 n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// Every thread of the cluster's CTAs: memory operations before it (shared memory of either
// CTA, mbarrier inits) are visible to every thread of the cluster after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Arrive on the mbarrier at the same shared-memory offset as `bar` in the cluster's CTA `cta`.
// Default semantics (release at CTA scope): the arriving warp publishes nothing (its wgmmas
// only read the stage, and have completed), and .release.cluster costs a memory barrier per
// arrive (H100: 39 % of the consumers' stall cycles, the kernel 1.4x slower under
// Nsight Compute; docs/gemm.md#clusters).
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 cta) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar), "r"(cta) : "memory");
}
// tma_load_2d into the same shared-memory offset of every CTA in `mask`, completing each
// one's mbarrier at `bar`'s offset by the box's bytes.
__device__ __forceinline__ void tma_load_2d_multicast(u32 dst, const TmaMap* map, int c0, int c1, u32 bar, u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3}], [%4], %5;\n"
      ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
}

// A position in the ring of STAGES stages: stage s and the parity of its use count (uses /
// STAGES, the phase its mbarriers are in), stepped without a division (7 stages at BN = 64:
// `it % 7` and `it / 7` were ~12 instructions per k-tile on the consumers' path to their wgmmas).
template <int STAGES> struct RingPos {
  int s = 0;
  u32 phase = 0;
  __device__ __forceinline__ void next() {
    if (++s == STAGES) {
      s = 0;
      phase ^= 1;
    }
  }
};

// The order in which a persistent grid walks the output. A unit is one cluster's work: CM
// vertically adjacent WG_BM x BN tiles (a "cluster row") of one split-K slice. Units are
// numbered slice by slice, and within a slice in groups of `group` cluster rows, column by
// column inside a group: the units in flight at once (consecutive numbers, one per cluster)
// then cover a compact block of A's rows and B's columns, which stays in L2.
struct WgWalk {
  int rows, cols, group;   // cluster rows, tile columns, cluster rows per group
  __device__ __forceinline__ void unit(int u, int& row, int& col, int& z) const {
    const int per_slice = rows * cols;
    z = u / per_slice;
    const int r = u - z * per_slice, first = r / (group * cols) * group, size = min(group, rows - first);
    const int w = r - first * cols;
    row = first + w % size;
    col = w / size;
  }
};

// One consumer warp is done reading a stage: its lane c arrives on the stage's empty barrier
// in cluster CTA c (the stage's B half that CTA multicast is then free to be overwritten).
template <int CM> __device__ __forceinline__ void release_stage(u32 bar, int lane) {
  if constexpr (CM == 1) {
    if (lane == 0) mbar_arrive(bar);
  } else {
    if (lane < CM) mbar_arrive_cluster(bar, lane);
  }
}

// KSPLIT's sum of the two consumer warpgroups' partial tiles (gemm_wgmma_tiles), after both
// main loops: warpgroup 1 writes its BN / 2 accumulators into the ring at `ring` (BN / 8
// 16-byte groups, group i of thread x at (128 i + x) x 16 bytes: a warp's stores are 512
// contiguous bytes), warpgroup 0 adds them to its own (k-steps 0 .. KS / 2 - 1 of each k-tile
// first; fp32 addition is commutative, so the sum is one number either way). Both consumer
// warpgroups call it (named barrier 3: their 256 threads). Returns whether this warpgroup
// stores the tile.
template <int BN>
__device__ __forceinline__ bool kwg_reduce(float* acc, u32 ring, int c, int x) {
  const u32 slot = ring + (u32)x * 16;
  asm volatile("bar.sync 3, 256;\n" ::: "memory");   // both warpgroups' wgmmas have read the ring
  if (c == 1) {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
      asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(slot + i * 2048), "f"(acc[4 * i]),
                   "f"(acc[4 * i + 1]), "f"(acc[4 * i + 2]), "f"(acc[4 * i + 3]) : "memory");
  }
  asm volatile("bar.sync 3, 256;\n" ::: "memory");
  if (c == 1) return false;
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
    float v[4];
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
                 : "r"(slot + i * 2048) : "memory");
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[4 * i + e] = add_exact(acc[4 * i + e], v[e]);
  }
  return true;
}

// The persistent GEMM: CTA (rank r of cluster q) computes units q, q + clusters, ... of the
// WgWalk over K slice z: the K range [z kslice, min((z + 1) kslice, K)) (a multiple of the
// k-tile; kslice = K: no split) into C + z slice_stride (Out: T, or float for split-K partial
// products). The TMA ring and its mbarrier phases run on across units, so the producer loads
// the next unit's first stages while the consumers store the last one. Clusters of CM = 2:
// the pair takes tile rows 2 row + r of one column and shares the B tile: each CTA loads its
// A tile and half of B, multicast to both. A stage is refilled once the consumer warps of
// both CTAs released it (empty counts 8 CM arrivals). (Pairs sharing A instead, along N,
// measured slower at every shape: docs/gemm.md#tried-and-not-kept.)
// SWAP (TF32 only): the kernel computes C^T (M and N are C^T's: C's N and M; see SwapRows):
// its A tile comes N-major through the consumers' registers, and cmap (32 x 32 boxes of C) is
// required.
// SINGLE (CM = 1, not SWAP; one unit per CTA: the grid is the units, never persistent): the
// epilogue's buffers in the ring (idle after the main loop; both consumer warpgroups' wgmmas
// done first), its whole budget WG_KSPLIT_SMEM_BYTES for stages: 9 at BN = 64 against 7.
// KSPLIT (CM = 1, one unit per CTA: the grid is the units, never persistent): tiles of 64 x BN,
// both consumer warpgroups on the tile's 64 rows, warpgroup c over k-steps c KS / 2 ..
// (c + 1) KS / 2 - 1 of each k-tile (KS = BK / KSTEP); then warpgroup 1's sums go through
// shared memory to warpgroup 0, which adds them and stores the tile (kwg_reduce). For outputs
// too small to fill the GPU with 128 x 128 tiles: as many CTAs as 128 x 64 tiles, but each
// wgmma 64 x 128 (a 64-wide wgmma reads as many shared-memory bytes per column of output as it
// computes, twice a 128-wide one's per value: docs/gemm.md#k-split-warpgroups); BN = 64 for
// outputs of at most a wave of 64 x 64 tiles, twice the CTAs, 16 KB a k-tile each
// (docs/gemm.md#narrow-k-split).
// BATCHED (CM = 1, not KSPLIT / SINGLE; the threads' stores, or with SWAP the TMA's through a
// 3-D cmap): `batch` products, z the entry instead of a K slice (each over the whole K): amap and
// bmap are 3-D (the entry their outermost coordinate; `bcast` bit 0 / 1: the kernel's A / B is one
// matrix for every entry, read at 0), C's entries slice_stride apart.
//
template <class T, bool B_NMAJOR, int BN, int CM, class Out, class Epi, bool SWAP = false, bool KSPLIT = false,
          bool SINGLE = false, bool BATCHED = false>
__device__ __forceinline__ void gemm_wgmma_tiles(const TmaMap* amap, const TmaMap* bmap, const TmaMap* cmap,
                                                 typename Traits<Out>::Bits* __restrict__ C, i64 ldc, i64 slice_stride,
                                                 int M, int N, int K, int kslice, int group, const Epi& epi,
                                                 int batch = 1, int bcast = 0) {
  static_assert(!B_NMAJOR || sizeof(typename Traits<T>::Bits) == 2, "N-major B needs a 16-bit type");
  static_assert(CM == 1 || CM == 2, "clusters of 1 or 2 CTAs");
  static_assert(BN / CM >= 64, "each CTA of a cluster loads whole 64-column boxes of B");
  static_assert(!SWAP || (WgCfg<T>::KSTEP == 8 && !B_NMAJOR && WgCfg<T>::BK == WG_SWAP_BOX),
                "SWAP: TF32, the kernel's B side K-major, boxes a k-tile deep");
  static_assert(!KSPLIT || (CM == 1 && !SWAP && (WgCfg<T>::BK / WgCfg<T>::KSTEP) % 2 == 0),
                "KSPLIT: single CTAs, operands as they are, an even number of k-steps per k-tile");
  static_assert(!SINGLE || (CM == 1 && !SWAP && !KSPLIT), "SINGLE: single CTAs, operands as they are");
  static_assert(!BATCHED || (CM == 1 && !KSPLIT && !SINGLE), "BATCHED: single CTAs, the plain or swapped tile loop");
  constexpr bool ONE = KSPLIT || SINGLE;   // one unit per CTA: the epilogue staged in the ring
  constexpr int BM = KSPLIT ? WG_KSPLIT_BM : WG_BM, A_BYTES = BM * 128;   // the tile's rows, its A tile's bytes
  constexpr int BK = WgCfg<T>::BK, KSTEP = WgCfg<T>::KSTEP;
  constexpr int KSTEP_BYTES = KSTEP * (int)sizeof(typename Traits<T>::Bits);
  // One unit per CTA (KSPLIT, SINGLE) stages its epilogue in the ring, idle once the main loop is
  // done, so its whole budget goes to stages: 9 against 7 with buffers of their own (the
  // measurements: cupy_ops/ops/gemm_plan.py WG_KSPLIT_SMEM_BYTES, WG_SINGLE_MAX_KTILES).
  constexpr int EPI_BYTES = ONE ? 0 : WG_EPI_BYTES, SMEM_BYTES = ONE ? WG_KSPLIT_SMEM_BYTES : WG_SMEM_BYTES;
  typedef WgRing<BN, A_BYTES, SMEM_BYTES, EPI_BYTES> Ring;
  constexpr int STAGES = Ring::STAGES, STAGE_BYTES = Ring::STAGE_BYTES;
  constexpr int KWG_BYTES = BN / 8 * 2048;   // kwg_reduce's slots, from the ring's start
  static_assert(!KSPLIT || KWG_BYTES + WG_EPI_BYTES / 2 <= STAGES * STAGE_BYTES,
                "KSPLIT: the reduction's slots and warpgroup 0's epilogue buffers fit in the ring");
  static_assert(!SINGLE || WG_EPI_BYTES <= STAGES * STAGE_BYTES, "SINGLE: the epilogue buffers fit in the ring");
  constexpr int B_ROWS = BN / CM;   // B rows (K-major) or columns (N-major) each CTA loads
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 ring = (smem_addr(smem_raw) + 1023u) & ~1023u;
  // the epilogue's buffers (WG_EPI_BYTES, 4 KB per consumer warp) right after the ring (KSPLIT:
  // warpgroup 0's in the ring, after the reduction's slots; SINGLE: in the ring from its start):
  // 1024-byte aligned, as the TMA's 128-byte swizzle of a store's source needs
  const u32 epi_buf = KSPLIT ? ring + KWG_BYTES : SINGLE ? ring : ring + STAGES * STAGE_BYTES;
  const u32 bars = ring + STAGES * STAGE_BYTES + EPI_BYTES;   // full[s] at bars + 8 s, empty[s] after them
  const int tid = threadIdx.x, wg = tid >> 7;
  const WgWalk walk{(M + BM * CM - 1) / (BM * CM), (N + BN - 1) / BN, group};
  const int units = walk.rows * walk.cols * (BATCHED ? batch : (K + kslice - 1) / kslice);
  const int rank = CM > 1 ? (int)cluster_rank() : 0, clusters = gridDim.x / CM;
  // unit u -> this CTA's tile origin (m0, n0), K slice z, its first k (k0) and k-tiles (>= 1)
  auto unit_of = [&](int u, int& m0, int& n0, int& z, int& k0, int& ktiles) {
    int row, col;
    walk.unit(u, row, col, z);
    m0 = (row * CM + rank) * BM, n0 = col * BN, k0 = BATCHED ? 0 : z * kslice;
    ktiles = ((BATCHED ? K : min(kslice, K - k0)) + BK - 1) / BK;
  };

  // The cluster size is the launch's (the host passes it; no __cluster_dims__): a launch that
  // disagrees with CM would multicast into, and arrive on, CTAs that are not there. Trap.
  if (cluster_ctas() != (u32)CM) asm volatile("trap;\n");
  // KSPLIT and SINGLE reuse the ring after the main loop (kwg_reduce, the epilogue): one unit per CTA
  if (ONE && (int)gridDim.x < units) asm volatile("trap;\n");
  if (tid == 0) {
    tma_prefetch_map(amap);
    tma_prefetch_map(bmap);
    if (cmap != nullptr) tma_prefetch_map(cmap);
    mbar_pairs_init<STAGES>(bars, 1, bars + 8 * STAGES, 8 * CM);   // empty: the consumer warps of the cluster
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (CM > 1) cluster_sync();   // the peer's barriers exist before anything reaches them
  else __syncthreads();

  if (wg == 0) {
    // Producer: a single thread.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(WG_PRODUCER_REGS));
    if (tid == 0) {
      RingPos<STAGES> pos;   // across units
      int uses = 0;          // of stages so far: from the second round on, a stage is refilled once released
      for (int u = blockIdx.x / CM; u < units; u += clusters) {
        int m0, n0, z, k0, ktiles;
        unit_of(u, m0, n0, z, k0, ktiles);
        for (int kt = 0; kt < ktiles; ++kt, ++uses, pos.next()) {
          const int s = pos.s;
          if (uses >= STAGES) mbar_wait(bars + 8 * (STAGES + s), pos.phase ^ 1);
          const u32 full = bars + 8 * s, a_dst = ring + s * STAGE_BYTES, b_dst = a_dst + A_BYTES;
          mbar_expect_tx(full, STAGE_BYTES);   // A + the whole B tile (half of it from the peer)
          const int k = k0 + kt * BK;
          constexpr u16 ALL = (1u << CM) - 1;
          if constexpr (SWAP) {
            // B^T's tile N-major: 4 boxes of 32 columns of C (128 bytes) x 32 values of K
#pragma unroll
            for (int i = 0; i < WG_BM / WG_SWAP_BOX; ++i) {
              if constexpr (BATCHED) tma_load_3d(a_dst + i * WG_SWAP_BOX_BYTES, amap, m0 + WG_SWAP_BOX * i, k, bcast & 1 ? 0 : z, full);
              else tma_load_2d(a_dst + i * WG_SWAP_BOX_BYTES, amap, m0 + WG_SWAP_BOX * i, k, full);
            }
          } else if constexpr (BATCHED) {
            tma_load_3d(a_dst, amap, k, m0, bcast & 1 ? 0 : z, full);
          } else {
            tma_load_2d(a_dst, amap, k, m0, full);
          }
          if constexpr (B_NMAJOR) {
            // boxes of 64 columns x 64 rows of K: 8 KB each, one swizzle atom column
#pragma unroll
            for (int j = 0; j < B_ROWS / 64; ++j) {
              const int i = rank * (B_ROWS / 64) + j;
              if constexpr (BATCHED) tma_load_3d(b_dst + i * 8192, bmap, n0 + 64 * i, k, bcast & 2 ? 0 : z, full);
              else if constexpr (CM == 1) tma_load_2d(b_dst + i * 8192, bmap, n0 + 64 * i, k, full);
              else tma_load_2d_multicast(b_dst + i * 8192, bmap, n0 + 64 * i, k, full, ALL);
            }
          } else {
            const u32 dst = b_dst + rank * B_ROWS * 128;
            if constexpr (BATCHED) tma_load_3d(dst, bmap, k, n0, bcast & 2 ? 0 : z, full);
            else if constexpr (CM == 1) tma_load_2d(dst, bmap, k, n0, full);
            else tma_load_2d_multicast(dst, bmap, k, n0 + rank * B_ROWS, full, ALL);
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(WG_CONSUMER_REGS));
    // Consumers: warpgroup c = wg - 1 computes rows 64 c .. 64 c + 63 of each tile.
    const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
    RingPos<STAGES> pos;
    int prev = 0;   // the stage of the previous k-tile
    // the warpgroup's A rows and the B tile of stage 0, as wgmma descriptors; a stage, k-step
    // or atom further is an address further, i.e. a sum in the descriptor's address field
    // (bits 0-13: shared addresses >> 4, all below 2^18, so no carry leaves the field): a
    // 32-bit add to the low word
    const u64 da0 = wg_desc(ring + (KSPLIT ? 0 : c * 64 * 128), 16, 1024);
    const u64 db0 = B_NMAJOR ? wg_desc(ring + A_BYTES, 8192, 1024) : wg_desc(ring + A_BYTES, 16, 1024);
    auto desc_plus = [](u64 d, u32 bytes) { return (d & ~0xffffffffull) | (u32)((u32)d + (bytes >> 4)); };
    const SwapRows rows(c, warp, lane);   // (SWAP only)
    // One k-tile: wait for its stage, (SWAP) load its A fragments into `fr`, issue its
    // wgmmas, then release the previous k-tile's stage once that one's wgmmas are done. With
    // SWAP the fragments of consecutive k-tiles alternate between two register sets: a
    // k-tile's stay in use until its wgmmas are waited for, a k-tile later.
    auto ktile = [&](float* acc, int kt, u32 (&fr)[BK / KSTEP][4]) {
      const int s = pos.s;
      const u32 stage = (u32)(s * STAGE_BYTES);
      mbar_wait(bars + 8 * s, pos.phase);
      if constexpr (SWAP) rows.load<BK / KSTEP>(fr, ring + stage + rows.base);
      wgmma_fence();
      constexpr int KS = KSPLIT ? BK / KSTEP / 2 : BK / KSTEP;   // k-steps this warpgroup takes
#pragma unroll
      for (int kq = 0; kq < KS; ++kq) {
        const int kk = KSPLIT ? c * KS + kq : kq;
        // K-major: the k-step is KSTEP_BYTES further along each 128-byte row (the swizzle is
        // a function of the address, so offsetting the start address is exact); 8-row groups
        // are 1024 bytes apart. N-major B: a k-step is KSTEP rows of 128 bytes further; 8-row
        // groups of K 1024 bytes apart, 64-column atoms 8 KB apart.
        const u64 db = desc_plus(db0, stage + (B_NMAJOR ? kk * KSTEP * 128 : kk * KSTEP_BYTES));
        if constexpr (SWAP) wgmma_tile_ra<BN>(acc, fr[kq], db, 1);
        else wgmma_tile<T, B_NMAJOR, BN>(acc, desc_plus(da0, stage + kk * KSTEP_BYTES), db);
      }
      wgmma_commit();
      wgmma_wait<1>();   // the previous k-tile's wgmmas are done: release its stage
      if (kt > 0) release_stage<CM>(bars + 8 * (STAGES + prev), lane);
      prev = s;
      pos.next();
    };
    for (int u = blockIdx.x / CM; u < units; u += clusters) {
      int m0, n0, z, k0, ktiles;
      unit_of(u, m0, n0, z, k0, ktiles);
      float acc[BN / 2];
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
      acc_fence<BN / 2>(acc);
      u32 fr0[BK / KSTEP][4], fr1[BK / KSTEP][4];
      int kt = 0;
      if constexpr (SWAP) {
        for (; kt + 1 < ktiles; kt += 2) {
          ktile(acc, kt, fr0);
          ktile(acc, kt + 1, fr1);
        }
      }
      for (; kt < ktiles; ++kt) ktile(acc, kt, fr0);
      if constexpr (SWAP) {
        typename Epi::Col rowp[2];   // the epilogue parameters of this thread's two rows (C columns)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int n = m0 + c * 64 + rows.nloc[i];
          rowp[i] = Epi::COLUMNS && n < M ? epi.column(n) : typename Epi::Col();
        }
        wgmma_wait<0>();
        acc_fence<BN / 2>(acc);
        release_stage<CM>(bars + 8 * (STAGES + prev), lane);
        wg_store_tile_tma_swap<BN>(acc, cmap, m0 + c * 64, n0, c, warp, lane, epi_buf + c * (WG_EPI_BYTES / 2), epi, rows,
                                    rowp, BATCHED ? z : -1);
      } else {
        const u32 buf = epi_buf + (c * 4 + warp) * 4096;
        EpiShare<BN, typename Epi::Col> sh;   // loaded while the last k-tile's wgmmas run
        epi_load<BN>(sh, epi, n0, N, lane);
        wgmma_wait<0>();
        acc_fence<BN / 2>(acc);
        release_stage<CM>(bars + 8 * (STAGES + prev), lane);
        if constexpr (KSPLIT) {
          if (!kwg_reduce<BN>(acc, ring, c, tid & 127)) continue;   // warpgroup 0 stores the tile
        }
        // SINGLE: the buffers lie in the ring, which the other warpgroup's last wgmmas may still
        // read (named barrier 3: both consumer warpgroups)
        if constexpr (SINGLE) asm volatile("bar.sync 3, 256;\n" ::: "memory");
        if (cmap != nullptr) wg_store_tile_tma<Out, BN>(acc, cmap, m0 + c * 64 + warp * 16, n0, lane, buf, epi, sh);
        else wg_store_tile_staged<Out, BN>(acc, C + z * slice_stride, ldc, M, N, m0 + c * 64, n0, warp, lane, buf, epi, sh);
      }
    }
    // the TMA has read the last stores' shared memory before it goes away. Only read, as
    // CUTLASS's epilogue tail (tma_store_wait): the writes to C complete with the grid, and
    // waiting for them kept the CTA on its SM (a next CTA of a grid of several waves waiting)
    // for the writes' round trip. Measured at one wave (a build waiting for them): within
    // the spread.
    if (cmap != nullptr && lane == 0) bulk_wait_read();
  }
  // No CTA of a cluster leaves while its peer may still multicast into its shared memory or
  // arrive on its barriers. (The barrier is .aligned: warp 0 reconverges with its producer
  // lane first.)
  if constexpr (CM > 1) {
    __syncwarp();
    cluster_sync();
  }
}
