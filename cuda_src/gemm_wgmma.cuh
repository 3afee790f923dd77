// Hopper tensor-core GEMM (sm_90a only: wgmma + TMA), fp32 accumulation.
//
// C[m, n] = epi(sum_k A[m, k] * B[k, n], n) for bf16 / fp16 operands (m64n256k16) or fp32
// operands read as TF32 (m64n256k8). A is K-major (row-major (M, K)); B is K-major (stored
// (N, K), the nn.Linear weight layout) or, for 16-bit types, N-major (row-major (K, N), as
// matmul's b): the instruction's transpose bit reads it in place. Both come in through TMA
// tensor maps the host encodes (cupy_ops/ops/tma.py); the tensor map zero-fills the tile
// parts past M, N and K, so any shape works and the epilogue masks the stores.
//
// Block tile WG_BM (128) x BN x 128 bytes of K (BN = 256, or 128 for grids too small to fill
// the GPU: the host picks, cupy_ops/ops/gemm_plan.py wgmma_tile_n), WG_THREADS (384: 3
// warpgroups), warp-specialized:
//   warpgroup 0: one thread issues the TMA loads of a ring of stages (as many as the host's
//     shared-memory budget WG_SMEM_BYTES holds: 4 at BN = 256, 6 at BN = 128);
//   warpgroups 1, 2: each owns 64 rows x BN columns (BN / 2 fp32 accumulators per thread)
//     and issues one wgmma per 16 (8 for TF32) values of K, keeping one k-tile of wgmmas in
//     flight while it waits for the next tile.
// Stages are handed over with mbarriers: full[s] (the TMA transaction count completes it),
// empty[s] (each of the 8 consumer warps arrives once its wgmmas that read the stage are done).
// Shared memory: WG_SMEM_BYTES (dynamic: the host raises the kernel's limit). 128-byte
// swizzle on both sides (TMA writes it, the wgmma descriptors read it): conflict-free
// without padding.
#pragma once
#include "common.cuh"
#include "wgmma_ops.cuh"

// WG_BM, WG_THREADS and WG_SMEM_BYTES come from the host (cupy_ops/ops/gemm_plan.py), which
// sizes the grid and the launch with them; the warp roles are written for 128 rows of 3 warpgroups.
#if !defined(WG_BM) || !defined(WG_THREADS) || !defined(WG_SMEM_BYTES)
#error "gemm_wgmma.cuh: the host passes WG_BM, WG_THREADS and WG_SMEM_BYTES (-D)"
#endif
static_assert(WG_BM == 128 && WG_THREADS == 384, "gemm_wgmma.cuh: a producer and 2 consumer warpgroups of 64 rows");
#define WG_A_BYTES (WG_BM * 128)

// Ring geometry per tile width: stages of A (16 KB) + B (BN rows x 128 bytes), as many as the
// host's budget holds after up to 1 KB lost aligning the ring to 1024 bytes (the 128-byte
// swizzle repeats every 1024 bytes; the descriptors assume that base), with 2 mbarriers
// (16 bytes) per stage.
template <int BN> struct WgRing {
  static constexpr int B_BYTES = BN * 128, STAGE_BYTES = WG_A_BYTES + B_BYTES;
  static constexpr int STAGES = (WG_SMEM_BYTES - 1024) / (STAGE_BYTES + 16);
  static_assert(STAGES >= 2, "gemm_wgmma.cuh: WG_SMEM_BYTES holds fewer than 2 stages");
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
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity) {
  u32 done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

// One TMA tile load: box at (c0 = innermost coordinate, c1) of the map -> shared memory at
// `dst`; completes `bar`'s transaction count by the box's bytes (zero-filled parts included).
__device__ __forceinline__ void tma_load_2d(u32 dst, const TmaMap* map, int c0, int c1, u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
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

// Two adjacent outputs (n, n + 1) of row `row`: one 4- or 8-byte store when both exist and
// the address is aligned for it (ldc even: C is a fresh torch tensor, 256-byte aligned).
template <class T, class Epi>
__device__ __forceinline__ void store_pair(typename Traits<T>::Bits* row, int n, int N, bool paired, float v0,
                                           float v1, const Epi& epi) {
  typedef typename Traits<T>::Bits Bits;
  if (paired && n + 1 < N) {
    const Bits b0 = from_acc<T>(epi(v0, n)), b1 = from_acc<T>(epi(v1, n + 1));
    if constexpr (sizeof(Bits) == 2) {
      *reinterpret_cast<u32*>(row + n) = (u32)b0 | ((u32)b1 << 16);
    } else {
      struct __align__(8) Pair { u32 lo, hi; };
      *reinterpret_cast<Pair*>(row + n) = Pair{b0, b1};
    }
  } else {
    if (n < N) row[n] = from_acc<T>(epi(v0, n));
    if (n + 1 < N) row[n + 1] = from_acc<T>(epi(v1, n + 1));
  }
}

// The epilogue of one warpgroup's 64 x BN accumulator tile at (m0, n0) of C: epi applied to
// each value, stores masked to M x N. Accumulator 4 j + {0, 1}: row 16 warp + g, columns
// 8 j + 2 t + {0, 1}; 4 j + {2, 3}: the same columns of row + 8 (the wgmma D fragment layout).
template <class Out, int BN, class Epi>
__device__ __forceinline__ void wg_store_tile(const float* acc, typename Traits<Out>::Bits* __restrict__ C, i64 ldc,
                                              int M, int N, int m0, int n0, int warp, int lane, const Epi& epi) {
  typedef typename Traits<Out>::Bits Bits;
  const int g = lane >> 2, t = lane & 3;
  const bool paired = (ldc & 1) == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int m = m0 + warp * 16 + g + 8 * h;
    if (m >= M) continue;
    Bits* row = C + (i64)m * ldc;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
      store_pair<Out>(row, n0 + 8 * j + 2 * t, N, paired, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1], epi);
  }
}

// T: operand type; Out: output type (T, or float for split-K partial products); the K range
// multiplied is [k0, k0 + K) of the tensor maps' K (k0 a multiple of the k-tile).
template <class T, bool B_NMAJOR, int BN, class Out, class Epi>
__device__ __forceinline__ void gemm_wgmma_block(const TmaMap* amap, const TmaMap* bmap, typename Traits<Out>::Bits* __restrict__ C,
                                           i64 ldc, int M, int N, int k0, int K, const Epi& epi) {
  static_assert(!B_NMAJOR || sizeof(typename Traits<T>::Bits) == 2, "N-major B needs a 16-bit type");
  constexpr int BK = WgCfg<T>::BK, KSTEP = WgCfg<T>::KSTEP;
  constexpr int KSTEP_BYTES = KSTEP * (int)sizeof(typename Traits<T>::Bits);
  constexpr int STAGES = WgRing<BN>::STAGES, STAGE_BYTES = WgRing<BN>::STAGE_BYTES;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 ring = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 bars = ring + STAGES * STAGE_BYTES;   // full[s] at bars + 8 s, empty[s] after them
  const int tid = threadIdx.x, wg = tid >> 7;
  const int m0 = blockIdx.y * WG_BM, n0 = blockIdx.x * BN;
  const int ktiles = (K + BK - 1) / BK;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars + 8 * s, 1);                       // the producer's arrive.expect_tx
      mbar_init(bars + 8 * (STAGES + s), 8);         // one arrive per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: a single thread. Stage s is refilled once both consumer warpgroups released it.
    if (tid == 0) {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(bars + 8 * (STAGES + s), ((kt / STAGES) - 1) & 1);
        const u32 full = bars + 8 * s, a_dst = ring + s * STAGE_BYTES, b_dst = a_dst + WG_A_BYTES;
        mbar_expect_tx(full, STAGE_BYTES);
        const int k = k0 + kt * BK;
        tma_load_2d(a_dst, amap, k, m0, full);
        if constexpr (B_NMAJOR) {
          // four boxes of 64 columns x 64 rows of K: 8 KB each, one swizzle atom column
#pragma unroll
          for (int i = 0; i < BN / 64; ++i) tma_load_2d(b_dst + i * 8192, bmap, n0 + 64 * i, k, full);
        } else {
          tma_load_2d(b_dst, bmap, k, n0, full);
        }
      }
    }
    return;
  }

  // Consumers: warpgroup c = wg - 1 computes rows 64 c .. 64 c + 63 of the block tile.
  const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt % STAGES;
    mbar_wait(bars + 8 * s, (kt / STAGES) & 1);
    const u32 a_tile = ring + s * STAGE_BYTES + c * 64 * 128, b_tile = ring + s * STAGE_BYTES + WG_A_BYTES;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / KSTEP; ++kk) {
      // K-major: the k-step is KSTEP_BYTES further along each 128-byte row (the swizzle is a
      // function of the address, so offsetting the start address is exact); 8-row groups are
      // 1024 bytes apart. N-major B: a k-step is KSTEP rows of 128 bytes further; 8-row
      // groups of K 1024 bytes apart, 64-column atoms 8 KB apart.
      const u64 da = wg_desc(a_tile + kk * KSTEP_BYTES, 16, 1024);
      const u64 db = B_NMAJOR ? wg_desc(b_tile + kk * KSTEP * 128, 8192, 1024) : wg_desc(b_tile + kk * KSTEP_BYTES, 16, 1024);
      wgmma_tile<T, B_NMAJOR, BN>(acc, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();   // the previous k-tile's wgmmas are done: release its stage
    if (kt > 0 && lane == 0) mbar_arrive(bars + 8 * (STAGES + (kt - 1) % STAGES));
  }
  wgmma_wait<0>();
  wg_store_tile<Out, BN>(acc, C, ldc, M, N, m0 + c * 64, n0, warp, lane, epi);
}
