// Tiled FP32 GEMM on the CUDA cores (no tensor cores): the default fp32 path when TF32 is
// not allowed, so results keep full fp32 precision as torch's SGEMM does.
//
// C[m, n] = epi(sum_k A[m, k] * B[k, n], n), C row-major (ldc). Block tile SG_TILE x SG_TILE
// (128), k-tile BK, SG_THREADS (256) threads, each thread an 8 x 8 register tile (two 4 x 4 quadrants 64 apart, so the
// shared-memory reads of a warp are conflict-free float4s). Tiles are double-buffered in
// shared memory: the next k-tile is loaded from global memory into registers while the
// current one is multiplied; one barrier per k-tile.
//
// Operand layouts: A is K-major (A[m*lda + k], row-major) or M-major (A[k*lda + m], a
// transposed view); B is N-major (B[k*ldb + n], row-major) or K-major (B[n*ldb + k]: the
// nn.Linear weight). `vec` bit 0 / bit 1: A / B may be read as 16-byte vectors (base aligned,
// leading dimension a multiple of 4); otherwise elements are read one by one. Edges (M, N, K
// not multiples of the tile) are handled by bounds checks (zero fill).
#pragma once
#include "common.cuh"

// SG_TILE, SG_THREADS and SG_BK come from the host (cupy_ops/ops/gemm_plan.py), which sizes
// the grid and the split-K slices with them; this layout is written for 128 and 256.
#if !defined(SG_TILE) || !defined(SG_THREADS) || !defined(SG_BK)
#error "gemm_simt.cuh: the host passes SG_TILE, SG_THREADS and SG_BK (-D)"
#endif
static_assert(SG_TILE == 128 && SG_THREADS == 256, "gemm_simt.cuh: 16 x 16 threads of 8 x 8 outputs");
#define SG_BM SG_TILE
#define SG_BN SG_TILE
#define SG_PAD 4        // row padding: the transposed tile stores hit distinct banks
// Blocks per SM the compiler must fit (__launch_bounds__), per operand layout. H200, 4096^3
// and 1024x8192x8192 (benchmarks/tune_simt.py, benchmarks/results/tune_simt_h200_runs8-9.log run 9): row-major (N-major) B
// ran 44.4 TFLOP/s at 1 block (registers uncapped) and 40.1 at 2 (capped at 128); K-major B
// (the nn.Linear weight, transposed into shared memory) with K-major A 41.5 at 1 and 45.3 at
// 2. Only that layout asks for 2: at the 128-register cap NVRTC 13.0 spilled 56 bytes with an
// M-major A (sm_90), and on sm_80. (Split-K kernels ask for 1 always: gemm.cu.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define SG_MIN_BLOCKS(A_KMAJOR, B_KMAJOR) 1
#else
#define SG_MIN_BLOCKS(A_KMAJOR, B_KMAJOR) ((A_KMAJOR) && (B_KMAJOR) ? 2 : 1)
#endif

struct alignas(16) F4 { float x, y, z, w; };

// Four consecutive elements p[0], p[step], p[2*step], p[3*step] with bounds; 16-byte vector
// when contiguous, aligned and fully in bounds.
__device__ __forceinline__ void load4(float r[4], const float* p, i64 step, int valid, bool vec) {
  if (vec && valid >= 4) {
    const F4 v = *reinterpret_cast<const F4*>(p);
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) r[i] = i < valid ? p[i * step] : 0.f;
  }
}

template <bool A_KMAJOR, bool B_KMAJOR, int BK, class Epi>
__device__ __forceinline__ void gemm_simt_block(const float* __restrict__ A, i64 lda, const float* __restrict__ B,
                                          i64 ldb, float* __restrict__ C, i64 ldc, int M, int N, int K, int vec,
                                          const Epi& epi) {
  __shared__ alignas(16) float As[2][BK][SG_BM + SG_PAD];
  __shared__ alignas(16) float Bs[2][BK][SG_BN + SG_PAD];
  constexpr int L = BK / 8;  // float4 loads per thread per operand and k-tile
  const int tid = threadIdx.x;
  const int m0 = blockIdx.y * SG_BM, n0 = blockIdx.x * SG_BN;
  const bool vec_a = vec & 1, vec_b = vec & 2;

  // Which 4-element groups of the A and B tiles this thread loads (L of each): group q =
  // tid + l * 256. K-major operand: row r = q / (BK/4), k offset c = (q % (BK/4)) * 4.
  // Other-major operand: k row r = q / 32, column c = (q % 32) * 4.
  float ra[L][4], rb[L][4];
  auto rowcol = [&](bool kmajor, int l, int& r, int& c) {
    const int q = tid + l * SG_THREADS;
    if (kmajor) { r = q / (BK / 4); c = (q % (BK / 4)) * 4; }
    else { r = q >> 5; c = (q & 31) * 4; }
  };

  // Interior blocks (whole 128 x 128 output tile inside C, both operands vector-readable)
  // read full k-tiles without bounds checks, from pointers advanced one k-tile at a time:
  // the checked path's per-load index and bounds arithmetic was ~12 % of the instructions
  // issued (ncu, H200, 4096^3: 129 non-FFMA/LDS/STS instructions per warp and k-tile).
  const bool interior = vec_a && vec_b && m0 + SG_BM <= M && n0 + SG_BN <= N;
  const float* ga;
  const float* gb;
  {
    int r, c;
    rowcol(A_KMAJOR, 0, r, c);
    ga = A_KMAJOR ? A + (i64)(m0 + r) * lda + c : A + (i64)r * lda + m0 + c;
    rowcol(B_KMAJOR, 0, r, c);
    gb = B_KMAJOR ? B + (i64)(n0 + r) * ldb + c : B + (i64)r * ldb + n0 + c;
  }
  // distance between a thread's successive 4-element groups, and from one k-tile to the next
  const i64 a_l = (A_KMAJOR ? SG_THREADS / (BK / 4) : SG_THREADS / 32) * lda;
  const i64 b_l = (B_KMAJOR ? SG_THREADS / (BK / 4) : SG_THREADS / 32) * ldb;
  const i64 a_next = A_KMAJOR ? BK : BK * lda, b_next = B_KMAJOR ? BK : BK * ldb;

  auto load_tiles = [&](int k0) {
    if (interior && k0 + BK <= K) {
#pragma unroll
      for (int l = 0; l < L; ++l) {
        const F4 va = *reinterpret_cast<const F4*>(ga + l * a_l);
        const F4 vb = *reinterpret_cast<const F4*>(gb + l * b_l);
        ra[l][0] = va.x; ra[l][1] = va.y; ra[l][2] = va.z; ra[l][3] = va.w;
        rb[l][0] = vb.x; rb[l][1] = vb.y; rb[l][2] = vb.z; rb[l][3] = vb.w;
      }
      ga += a_next;
      gb += b_next;
      return;
    }
    ga += a_next;
    gb += b_next;
#pragma unroll
    for (int l = 0; l < L; ++l) {
      int r, c;
      rowcol(A_KMAJOR, l, r, c);
      if (A_KMAJOR) {
        const int m = m0 + r, k = k0 + c;
        load4(ra[l], A + (i64)m * lda + k, 1, m < M ? min(4, K - k) : 0, vec_a);
      } else {
        const int k = k0 + r, m = m0 + c;
        load4(ra[l], A + (i64)k * lda + m, 1, k < K ? min(4, M - m) : 0, vec_a);
      }
      rowcol(B_KMAJOR, l, r, c);
      if (B_KMAJOR) {
        const int n = n0 + r, k = k0 + c;
        load4(rb[l], B + (i64)n * ldb + k, 1, n < N ? min(4, K - k) : 0, vec_b);
      } else {
        const int k = k0 + r, n = n0 + c;
        load4(rb[l], B + (i64)k * ldb + n, 1, k < K ? min(4, N - n) : 0, vec_b);
      }
    }
  };
  auto store_tiles = [&](int buf) {
#pragma unroll
    for (int l = 0; l < L; ++l) {
      int r, c;
      rowcol(A_KMAJOR, l, r, c);
      if (A_KMAJOR) {
#pragma unroll
        for (int i = 0; i < 4; ++i) As[buf][c + i][r] = ra[l][i];
      } else {
        *reinterpret_cast<F4*>(&As[buf][r][c]) = F4{ra[l][0], ra[l][1], ra[l][2], ra[l][3]};
      }
      rowcol(B_KMAJOR, l, r, c);
      if (B_KMAJOR) {
#pragma unroll
        for (int i = 0; i < 4; ++i) Bs[buf][c + i][r] = rb[l][i];
      } else {
        *reinterpret_cast<F4*>(&Bs[buf][r][c]) = F4{rb[l][0], rb[l][1], rb[l][2], rb[l][3]};
      }
    }
  };

  // Thread (tx, ty) of the 16 x 16 grid; a warp covers 8 tx by 4 ty, so each k step its
  // shared-memory reads are 8 distinct float4 of B and 4 of A: one wavefront each.
  const int warp = tid >> 5, lane = tid & 31;
  const int tx = (warp & 1) * 8 + (lane & 7), ty = (warp >> 1) * 4 + (lane >> 3);
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  const int ktiles = (K + BK - 1) / BK;
  if (ktiles > 0) {
    load_tiles(0);
    store_tiles(0);
  }
  __syncthreads();
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < ktiles) load_tiles((kt + 1) * BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const F4 a0 = *reinterpret_cast<const F4*>(&As[cur][k][ty * 4]);
      const F4 a1 = *reinterpret_cast<const F4*>(&As[cur][k][ty * 4 + 64]);
      const F4 b0 = *reinterpret_cast<const F4*>(&Bs[cur][k][tx * 4]);
      const F4 b1 = *reinterpret_cast<const F4*>(&Bs[cur][k][tx * 4 + 64]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fma_exact(a[i], b[j], acc[i][j]);  // no FTZ: as cuBLAS
    }
    if (kt + 1 < ktiles) store_tiles(cur ^ 1);
    __syncthreads();
  }

  // Epilogue: rows ty*4 + {0..3} (+64), columns tx*4 + {0..3} (+64).
  const bool vec_c = ((reinterpret_cast<u64>(C) | (u64)ldc * 4) & 15) == 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + ty * 4 + (i & 3) + (i >> 2) * 64;
    if (m >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + tx * 4 + h * 64;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = n + j < N ? epi(acc[i][h * 4 + j], n + j) : 0.f;
      float* dst = C + (i64)m * ldc + n;
      if (vec_c && n + 3 < N) {
        *reinterpret_cast<F4*>(dst) = F4{v[0], v[1], v[2], v[3]};
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (n + j < N) dst[j] = v[j];
      }
    }
  }
}
