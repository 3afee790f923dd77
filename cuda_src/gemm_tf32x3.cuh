// Hopper fp32 GEMM at tensor-core speed with fp32-class accuracy ("3xTF32", sm_90a only).
//
// Each fp32 operand x is split into two TF32 numbers, x ~= hi + lo, and
// C = sum_k a_lo b_hi + a_hi b_lo + a_hi b_hi: three TF32 wgmmas per k-step. The dropped
// a_lo b_lo and the rounding of lo leave < 2^-21 relative per product, the order of fp32's own
// rounding (error table: docs/numerics.md#tf32x3).
//
// Same skeleton as gemm_wgmma.cuh (block tile WG_BM (128) x BN (128), 384 threads, TMA ring of
// STAGES stages of A (128 rows x 32 fp32) and B (BN rows x 32 fp32), both K-major, 128-byte
// swizzle, loaded as exact fp32: the host's tensor maps do not round to TF32 here), with the
// split done in shared memory and registers, so no extra pass over global memory:
//   warpgroup 0, warp 0, one thread: the TMA loads (as gemm_wgmma.cuh);
//   b_hi is the B tile itself (the tensor cores truncate fp32 to TF32); b_lo goes to a second
//     ring of LO slots (same swizzled layout), written by X3_SPLITTERS threads (warps 1-3 of
//     warpgroup 0 and every consumer thread), each slot released to the consumers by lo_full;
//   warpgroups 1, 2 (consumers, 64 rows each): load their A fragments from shared memory into
//     registers, split them there, and issue the three wgmmas per k-step with A from registers
//     (wgmma_tile_ra). While k-tile kt's wgmmas run they load and split kt + 1's A fragments;
//     their share of kt + 1's b_lo comes first (before kt's wgmmas are issued: a consumer then
//     has no wgmma in flight when it fences its shared-memory writes; measured faster).
// Barriers per stage: full[s] (TMA bytes), empty[s] (8 consumer warps); per lo slot: lo_full[j]
// (the 11 splitting warps), lo_empty[j] (8 consumer warps).
//
// Promotion: the tensor cores' accumulation is not fp32's (H100: summing all of K in the wgmma
// accumulators gave 5-25x torch fp32's error, growing with K: 3.3e-5 at K = 4096 against
// torch's 2.7e-6), so every X3_PROMOTE_EVERY k-tiles the wgmmas' partial sum (started fresh
// with scale-d = 0) is added to the running fp32 sum with add.rn.
//
// Registers: a consumer holds the sum and the partial (BN / 2 each) plus two sets of 32 A
// registers (hi and lo of 4 k-steps: the current k-tile's, live until its wgmmas are waited
// for, and the next one's); setmaxnreg moves registers from warpgroup 0 (which needs few) to
// the consumers. Hence BN = 128 only.
//
// PRE (gemm_tf32x3_pre, _swap_pre): C's A split by a pass (tf32x3_split_a, the
// same rule and bits), its hi and lo two tiles of each stage: the kernel's A, read by the wgmmas
// from shared memory (PRE_A), or with SWAP its B, whose b_lo then needs no split (PRE_B: no lo
// slots). SWAP's A side (B^T) comes N-major from a row-major B (SwapRows) or, A_KMAJOR
// (_swap_pre's KMAJOR: a Linear's weight), K-major as an unswapped A: B's split then costs registers
// only, wherever B lies.
// NOTES: every CTA of a column of C's tiles splits the same A rows again, so where C has many
// columns of tiles the pass costs less than the repeated split (the host's cost model decides,
// tf32x3.py; H200 kernel times in docs/gemm.md#tf32x3).
#pragma once
#include "gemm_wgmma.cuh"

#if !defined(X3_SMEM_BYTES)
#error "gemm_tf32x3.cuh: the host passes X3_SMEM_BYTES (-D)"
#endif

// Tuned on H100 (4096^3 and 1024 x 8192 x 8192, docs/gemm.md#tf32x3):
//   X3_LO: b_lo slots; 3 with the early split share ran 1.33 / 1.39 ms, 2 ran 1.43 / 1.42 ms.
//   X3_PROMOTE_EVERY: k-tiles per promotion; 2 ran 3 % faster than 1 (half the add.rn) with
//     the error still 0.3x torch fp32's at the benchmark shapes.
#define X3_LO 3
#define X3_PROMOTE_EVERY 2

// Ring geometry per tile width: stages of A (16 KB) + B (BN x 128 bytes), and LO slots of
// b_lo (BN x 128 bytes), in the host's budget X3_SMEM_BYTES after up to 1 KB aligning the
// rings to 1024 bytes (the swizzle atom) and 16 bytes of mbarriers per stage and per slot.
template <int BN, bool PRE_A = false, bool PRE_B = false> struct X3Ring {
  static constexpr int A_BYTES = (PRE_A ? 2 : 1) * WG_A_BYTES;   // PRE_A: A's hi, then its lo
  static constexpr int B_BYTES = BN * 128, LO = PRE_B ? 0 : X3_LO;   // PRE_B: B's lo after its hi
  static constexpr int STAGE_BYTES = A_BYTES + (PRE_B ? 2 : 1) * B_BYTES;
  static constexpr int STAGES = (X3_SMEM_BYTES - 1024 - LO * (B_BYTES + 16)) / (STAGE_BYTES + 16);
  static_assert(STAGES >= 2, "gemm_tf32x3.cuh: X3_SMEM_BYTES holds fewer than 2 stages");
};

// Threads splitting b_lo: warps 1-3 of warpgroup 0 and both consumer warpgroups (the split is
// work the tensor cores wait for: with the 3 warps alone and the first, heavier split, 4096^3
// took 2.1 ms, with no split at all 1.04 ms; with all of them 1.82 ms).
#define X3_SPLITTERS (WG_THREADS - 32)

// x = hi + lo (approximately), both read by the tensor cores as TF32 (which truncate the low
// 13 bits of what they are given: docs/numerics.md#tf32-rounding):
//   hi: x truncated to TF32 (never rounds up, so never overflows to inf). For B the tensor
//       cores truncate the tile in place; A's is explicit (it sits in registers).
//   lo: the remainder r = x - hi (exact in fp32, same sign as x) rounded to the nearest TF32:
//       hi + lo is x to within 2^-22 |x| (unbiased; truncating lo instead made the error of
//       all-positive inputs grow with K); the error table is in
//       docs/numerics.md#tf32x3.
// The split is ALU work the tensor cores wait for, so its common path is 5 instructions (and,
// sub, compare, add, and: tf32_rem, tf32_special, tf32_round); the rest is rare ("special": the
// remainder computed with denormals flushed is +-0, inf or NaN, i.e. x is zero, subnormal, a
// TF32 number, +-inf or NaN, or r is subnormal) and done exactly by tf32_fix:
//   lo = +-2^-126 with x's sign where r = 0 for a nonzero x, or x is +-inf or NaN: a_lo * b_hi
//       then never computes 0 * inf = NaN where torch's a * b is +-inf (its magnitude,
//       < 2^-126 |b|, is below any fp32 sum it joins);
//   hi = a NaN that survives truncation for a NaN x (a payload only in the low 13 bits would
//       read as inf);
//   a subnormal x becomes hi = lo = +-2^-126 (x ~= +-2^-125): the tensor cores read subnormals
//       as zero, and inf * x must stay inf; the absolute error, < 2^-125 |b| a product, is
//       twice what flushing x to zero would leave (and the test bounds it so).
__device__ __forceinline__ float tf32_rem(u32 u, u32 hi) {
  float r;
  asm("sub.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(__uint_as_float(u)), "f"(__uint_as_float(hi)));
  return r;
}
// r is +-0 or NaN (never inf: |r| < 2^-10 |x| for a finite x)
__device__ __forceinline__ bool tf32_special(float rem) { return !(fabsf(rem) > 0.f); }
// A normal r rounded to the nearest TF32, ties away from zero (cvt.rna's rounding in two
// integer instructions); +-0 stays +-0 and a quiet NaN stays NaN, so tf32_special still holds.
__device__ __forceinline__ u32 tf32_round(u32 r) { return (r + 0x1000u) & 0xffffe000u; }
__device__ __forceinline__ void tf32_fix(u32 u, u32& hi, u32& lo) {
  const u32 mag = u & 0x7fffffffu, tiny = (u & 0x80000000u) | 0x00800000u;
  float r;   // the exact remainder (no flush)
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(__uint_as_float(u)), "f"(__uint_as_float(u & 0xffffe000u)));
  hi = mag > 0x7f800000u ? 0x7fffe000u : mag != 0u && mag < 0x00800000u ? tiny : u & 0xffffe000u;
  lo = mag == 0u ? 0u : mag < 0x00800000u || mag >= 0x7f800000u || r == 0.f ? tiny : __float_as_uint(r);
}

// The b_lo of one B tile (at b, BN x 128 swizzled bytes; b_lo to l at the same offsets: the
// split is elementwise) by X3_SPLITTERS threads, this one of rank `rank`; then the fence that
// makes these generic-proxy writes visible to the wgmmas (async proxy) that read them. b_hi is
// b itself, except that a group holding a NaN or a subnormal gets its b_hi written back.
template <int B_BYTES>
__device__ __forceinline__ void x3_split_b(u32 b, u32 l, int rank) {
#pragma unroll 1
  for (int v = rank; v < B_BYTES / 16; v += X3_SPLITTERS) {
    u32 x[4], r[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(b + 16 * v) : "memory");
    bool special = false;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float rf = tf32_rem(x[q], x[q] & 0xffffe000u);
      special |= tf32_special(rf);
      r[q] = tf32_round(__float_as_uint(rf));
    }
    if (special) {
      u32 h[4];
      bool rewrite = false;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        h[q] = x[q];
        if (tf32_special(__uint_as_float(r[q]))) tf32_fix(x[q], h[q], r[q]);
        rewrite |= (h[q] & 0xffffe000u) != (x[q] & 0xffffe000u);   // NaN or subnormal
      }
      if (rewrite)
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(b + 16 * v), "r"(h[0]), "r"(h[1]), "r"(h[2]),
                     "r"(h[3]) : "memory");
    }
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(l + 16 * v), "r"(r[0]), "r"(r[1]), "r"(r[2]),
                 "r"(r[3]) : "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// x = hi + lo for R x 4 values (the rule above): the common path for all, then, if any is
// special, tf32_fix for those (one branch for the lot: special values are rare).
template <int R>
__device__ __forceinline__ void tf32_split(const u32 (&x)[R][4], u32 (&hi)[R][4], u32 (&lo)[R][4]) {
  bool special = false;
#pragma unroll
  for (int kk = 0; kk < R; ++kk) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      hi[kk][q] = x[kk][q] & 0xffffe000u;
      const float r = tf32_rem(x[kk][q], hi[kk][q]);
      special |= tf32_special(r);
      lo[kk][q] = tf32_round(__float_as_uint(r));
    }
  }
  if (special) {
#pragma unroll
    for (int kk = 0; kk < R; ++kk)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (tf32_special(__uint_as_float(lo[kk][q]))) tf32_fix(x[kk][q], hi[kk][q], lo[kk][q]);
  }
}

// A consumer thread's A fragments of one k-tile (BK / 8 k-steps), split in registers. The
// fragments come from the stage's A tile at `a`: K-major (the tile's rows 16 warp + g and + 8
// at a = the tile + row (16 warp + g) x 128 + 4 t; k-step kk takes columns 8 kk + t (16-byte
// group 2 kk, stored at group (2 kk) ^ g by the swizzle, g being both rows' index mod 8) and
// 8 kk + t + 4 (group 2 kk + 1)); or, NMAJOR, N-major through `rows` (gemm_wgmma.cuh SwapRows,
// a = the tile + rows.base).
template <int BK, bool NMAJOR>
__device__ __forceinline__ void x3_load_a(u32 a, int g, const SwapRows& rows, u32 (&hi)[BK / 8][4],
                                          u32 (&lo)[BK / 8][4]) {
  u32 x[BK / 8][4];
  if constexpr (NMAJOR) {
    rows.load<BK / 8>(x, a);
  } else {
#pragma unroll
    for (int kk = 0; kk < BK / 8; ++kk) {
      const u32 p0 = a + ((u32)((2 * kk) ^ g) << 4), p1 = a + ((u32)((2 * kk + 1) ^ g) << 4);
      asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(x[kk][0]) : "r"(p0) : "memory");
      asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(x[kk][1]) : "r"(p0 + 8 * 128) : "memory");
      asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(x[kk][2]) : "r"(p1) : "memory");
      asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(x[kk][3]) : "r"(p1 + 8 * 128) : "memory");
    }
  }
  tf32_split<BK / 8>(x, hi, lo);
}

// A consumer's share of k-tile kt's b_lo (B tile at b), once slot kt % LO is free.
template <int B_BYTES, int LO>
__device__ __forceinline__ void x3_split_share(int kt, u32 b, u32 lo_ring, u32 lo_full, u32 lo_empty, int rank, int lane) {
  const int j = kt % LO;
  if (kt >= LO) mbar_wait(lo_empty + 8 * j, ((kt / LO) - 1) & 1);
  x3_split_b<B_BYTES>(b, lo_ring + j * B_BYTES, rank);
  __syncwarp();
  if (lane == 0) mbar_arrive(lo_full + 8 * j);
}

// One consumer k-tile: this thread's share of k-tile kt + 1's b_lo; the 3 BK / 8 wgmmas of
// k-tile kt from (hi, lo) into part, and meanwhile kt + 1's A fragments into (nhi, nlo); then
// the stage and b_lo slot released and, every X3_PROMOTE_EVERY k-tiles, part added to acc.
// PRE_A: A's hi and lo are the stage's tiles (a_row: this warpgroup's rows in them), read by the
// wgmmas from shared memory; the register sets are not used. PRE_B: b_lo is the stage's tile
// after B's (no share of a split, no lo slot).
template <int BN, int BK, int STAGES, int LO, int STAGE_BYTES, int A_BYTES, int B_BYTES, bool NMAJOR, bool PRE_A,
          bool PRE_B>
__device__ __forceinline__ void x3_ktile(int kt, int ktiles, u32 ring, u32 lo_ring, u32 a_row, int g,
                                         const SwapRows& rows, u32 full, u32 empty,
                                         u32 lo_full, u32 lo_empty, int rank, int lane, const u32 (&hi)[BK / 8][4],
                                         const u32 (&lo)[BK / 8][4], u32 (&nhi)[BK / 8][4], u32 (&nlo)[BK / 8][4],
                                         float* acc, float* part) {
  const int s = kt % STAGES;
  const u32 b_tile = ring + s * STAGE_BYTES + A_BYTES;
  u32 l_tile = b_tile + B_BYTES;   // PRE_B's; else the lo slot's
  const bool fresh = kt % X3_PROMOTE_EVERY == 0;   // part starts over at this k-tile
  if (kt + 1 < ktiles) {
    const int s1 = (kt + 1) % STAGES;
    mbar_wait(full + 8 * s1, ((kt + 1) / STAGES) & 1);
    if constexpr (!PRE_B)
      x3_split_share<B_BYTES, LO>(kt + 1, ring + s1 * STAGE_BYTES + A_BYTES, lo_ring, lo_full, lo_empty, rank, lane);
  }
  if constexpr (!PRE_B) {
    l_tile = lo_ring + (kt % LO) * B_BYTES;
    mbar_wait(lo_full + 8 * (kt % LO), (kt / LO) & 1);
  }
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 8; ++kk) {
    const u64 dh = wg_desc(b_tile + kk * 32, 16, 1024), dl = wg_desc(l_tile + kk * 32, 16, 1024);
    if constexpr (PRE_A) {
      const u32 a_hi = ring + s * STAGE_BYTES + a_row + kk * 32;
      const u64 dah = wg_desc(a_hi, 16, 1024), dal = wg_desc(a_hi + WG_A_BYTES, 16, 1024);
      wgmma_tile_ss<BN>(part, dal, dh, kk > 0 || !fresh);
      wgmma_tile_ss<BN>(part, dah, dl, 1);
      wgmma_tile_ss<BN>(part, dah, dh, 1);
    } else {
      wgmma_tile_ra<BN>(part, lo[kk], dh, kk > 0 || !fresh);   // a fresh part: the product (no zeroing)
      wgmma_tile_ra<BN>(part, hi[kk], dl, 1);
      wgmma_tile_ra<BN>(part, hi[kk], dh, 1);
    }
  }
  wgmma_commit();
  if (!PRE_A && kt + 1 < ktiles) {
    const int s1 = (kt + 1) % STAGES;   // loaded: waited for above
    x3_load_a<BK, NMAJOR>(ring + s1 * STAGE_BYTES + a_row, g, rows, nhi, nlo);
  }
  wgmma_wait<0>();   // (hi, lo), the stage and the slot are free again
  if (lane == 0) {
    mbar_arrive(empty + 8 * s);
    if constexpr (!PRE_B) mbar_arrive(lo_empty + 8 * (kt % LO));
  }
  if ((kt + 1) % X3_PROMOTE_EVERY == 0 || kt + 1 == ktiles) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = add_exact(acc[i], part[i]);
  }
}

// SWAP: C^T = B^T A^T (as gemm_wgmma.cuh's SWAP): M and N are C^T's, amap covers B (K, N)
// row-major in 32 x 32 boxes or, A_KMAJOR, B^T (N, K) K-major as an unswapped A; bmap A as the
// K-major B side (whose lo the splitters make), C / ldc are C's; the epilogue stores transposed
// (wg_store_tile_t).
// PRE: C's A split by a pass (tf32x3_split_a): its hi in amap (bmap with SWAP), its lo in lo_map.
template <int BN, class Out, class Epi, bool SWAP = false, bool PRE = false, bool A_KMAJOR = !SWAP>
__device__ __forceinline__ void gemm_tf32x3_block(const TmaMap* amap, const TmaMap* lo_map, const TmaMap* bmap,
                                                  typename Traits<Out>::Bits* __restrict__ C, i64 ldc, int M, int N,
                                                  int k0, int K, const Epi& epi) {
  constexpr int BK = 32;   // fp32 values of K per k-tile: one 128-byte swizzled row
  constexpr bool PRE_A = PRE && !SWAP, PRE_B = PRE && SWAP, NMAJOR = !A_KMAJOR;
  static_assert(A_KMAJOR || SWAP, "gemm_tf32x3.cuh: an N-major A side is a row-major B's, swapped");
  using Ring = X3Ring<BN, PRE_A, PRE_B>;
  constexpr int STAGES = Ring::STAGES, LO = Ring::LO;
  constexpr int STAGE_BYTES = Ring::STAGE_BYTES, A_BYTES = Ring::A_BYTES, B_BYTES = Ring::B_BYTES;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 ring = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 lo_ring = ring + STAGES * STAGE_BYTES;
  const u32 bars = lo_ring + LO * B_BYTES;
  // full[s], empty[s], lo_full[j], lo_empty[j]
  const u32 full = bars, empty = bars + 8 * STAGES, lo_full = bars + 16 * STAGES, lo_empty = lo_full + 8 * LO;
  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
  const int m0 = blockIdx.y * WG_BM, n0 = blockIdx.x * BN;
  const int ktiles = (K + BK - 1) / BK;

  if (tid == 0) {
    tma_prefetch_map(amap);
    if constexpr (PRE) tma_prefetch_map(lo_map);
    tma_prefetch_map(bmap);
    mbar_pairs_init<STAGES>(full, 1, empty, 8);
    mbar_pairs_init<LO>(lo_full, X3_SPLITTERS / 32, lo_empty, 8);   // b_lo's slots: the splitter warps fill them
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(WG_PRODUCER_REGS));
    if (warp == 0) {
      if (lane == 0) {
        for (int kt = 0; kt < ktiles; ++kt) {
          const int s = kt % STAGES;
          if (kt >= STAGES) mbar_wait(empty + 8 * s, ((kt / STAGES) - 1) & 1);
          const u32 a_dst = ring + s * STAGE_BYTES;
          mbar_expect_tx(full + 8 * s, STAGE_BYTES);
          const int k = k0 + kt * BK;
          if constexpr (NMAJOR) {
#pragma unroll
            for (int i = 0; i < WG_BM / WG_SWAP_BOX; ++i)
              tma_load_2d(a_dst + i * WG_SWAP_BOX_BYTES, amap, m0 + WG_SWAP_BOX * i, k, full + 8 * s);
          } else {
            tma_load_2d(a_dst, amap, k, m0, full + 8 * s);
            if constexpr (PRE_A) tma_load_2d(a_dst + WG_A_BYTES, lo_map, k, m0, full + 8 * s);
          }
          tma_load_2d(a_dst + A_BYTES, bmap, k, n0, full + 8 * s);
          if constexpr (PRE_B) tma_load_2d(a_dst + A_BYTES + B_BYTES, lo_map, k, n0, full + 8 * s);
        }
      }
      return;
    }
    // Splitter warps: their share of every k-tile's b_lo (X3_SPLITTERS: rank = tid - 32); none
    // with PRE_B (b_lo comes with the stage).
    if constexpr (!PRE_B) {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES, j = kt % LO;
        mbar_wait(full + 8 * s, (kt / STAGES) & 1);
        if (kt >= LO) mbar_wait(lo_empty + 8 * j, ((kt / LO) - 1) & 1);
        x3_split_b<B_BYTES>(ring + s * STAGE_BYTES + A_BYTES, lo_ring + j * B_BYTES, tid - 32);
        __syncwarp();
        if (lane == 0) mbar_arrive(lo_full + 8 * j);
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(WG_CONSUMER_REGS));
  // Consumers: warpgroup c = wg - 1 computes rows 64 c .. 64 c + 63 of the block tile.
  const int c = wg - 1, g = lane >> 2, t = lane & 3;
  float acc[BN / 2], part[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  const SwapRows rows(c, warp, lane);   // (NMAJOR only)
  // the fragments' place in the A tile; PRE_A: the warpgroup's first row (the wgmmas' descriptor)
  const u32 a_row = NMAJOR ? rows.base : PRE_A ? (u32)(c * 64 * 128) : (u32)(c * 64 + warp * 16 + g) * 128u + 4 * t;
  // Two sets of A registers: k-tile kt + 1's are loaded and split while kt's wgmmas run.
  u32 hi0[BK / 8][4], lo0[BK / 8][4], hi1[BK / 8][4], lo1[BK / 8][4];
  const int rank = tid - 32;   // in the b_lo split
  if (ktiles > 0) {
    mbar_wait(full, 0);
    if constexpr (!PRE_A) x3_load_a<BK, NMAJOR>(ring + a_row, g, rows, hi0, lo0);
    if constexpr (!PRE_B) x3_split_share<B_BYTES, LO>(0, ring + A_BYTES, lo_ring, lo_full, lo_empty, rank, lane);
  }
  for (int kt = 0; kt < ktiles; kt += 2) {
    x3_ktile<BN, BK, STAGES, LO, STAGE_BYTES, A_BYTES, B_BYTES, NMAJOR, PRE_A, PRE_B>(kt, ktiles, ring, lo_ring, a_row, g, rows, full, empty,
                                                            lo_full, lo_empty, rank, lane, hi0, lo0, hi1, lo1, acc,
                                                            part);
    if (kt + 1 < ktiles)
      x3_ktile<BN, BK, STAGES, LO, STAGE_BYTES, A_BYTES, B_BYTES, NMAJOR, PRE_A, PRE_B>(kt + 1, ktiles, ring, lo_ring, a_row, g, rows, full,
                                                              empty, lo_full, lo_empty, rank, lane, hi1, lo1, hi0,
                                                              lo0, acc, part);
  }
  if constexpr (SWAP) {
    // the kernel rows (C's columns) of this thread's accumulator rows g and g + 8
    const int nloc[2] = {NMAJOR ? rows.nloc[0] : 16 * warp + g, NMAJOR ? rows.nloc[1] : 16 * warp + g + 8};
    wg_store_tile_t<Out, BN>(acc, C, ldc, M, N, m0 + c * 64, n0, lane, nloc, epi);
  } else {
    wg_store_tile<Out, BN>(acc, C, ldc, M, N, m0 + c * 64, n0, warp, lane, epi);
  }
}

// tf32x3's split of A (M, K) by a pass, for gemm_tf32x3_pre: hi and lo of every value
// (tf32_split: the bits x3_load_a makes) into hi / lo, (M, K) rows ldw apart (ldw a multiple of
// 4, the columns past K zero). A's rows lda apart from a 16-byte aligned start (its TMA map's
// rule), lda a multiple of 4. A thread a 16-byte group: blockIdx.x the groups of a row,
// blockIdx.y and the loop its rows.
__device__ __forceinline__ void tf32x3_split_rows(const u32* __restrict__ a, i64 lda, u32* __restrict__ hi,
                                                  u32* __restrict__ lo, i64 ldw, int M, int K) {
  const int k = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (k >= K) return;
  for (int m = blockIdx.y; m < M; m += gridDim.y) {
    const u32* row = a + m * lda + k;
    u32 x[1][4], h[1][4], l[1][4];
    if (k + 4 <= K) {
      const uint4 v = *reinterpret_cast<const uint4*>(row);
      x[0][0] = v.x, x[0][1] = v.y, x[0][2] = v.z, x[0][3] = v.w;
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) x[0][q] = k + q < K ? row[q] : 0u;
    }
    tf32_split<1>(x, h, l);
    *reinterpret_cast<uint4*>(hi + m * ldw + k) = make_uint4(h[0][0], h[0][1], h[0][2], h[0][3]);
    *reinterpret_cast<uint4*>(lo + m * ldw + k) = make_uint4(l[0][0], l[0][1], l[0][2], l[0][3]);
  }
}
