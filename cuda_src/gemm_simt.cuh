// Tiled FP32 GEMM on the CUDA cores (no tensor cores): the default fp32 path when TF32 is
// not allowed, so results keep full fp32 precision as torch's SGEMM does.
//
// C[m, n] = epi(sum_k A[m, k] * B[k, n], m, n), C row-major (ldc). Block tile SG_TILE x SG_TILE
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

// SG_TILE, SG_THREADS, SG_BK, SG_PAD (floats of padding per tile row: the transposing stores of a
// K-major operand hit distinct banks) and SG_SMEM_BYTES come from the host (cupy_ops/ops/gemm_plan.py), which sizes
// the grid and the split-K slices with them; this layout is written for 128 and 256.
#if !defined(SG_TILE) || !defined(SG_THREADS) || !defined(SG_BK) || !defined(SG_PAD) || !defined(SG_SMEM_BYTES)
#error "gemm_simt.cuh: the host passes SG_TILE, SG_THREADS, SG_BK, SG_PAD and SG_SMEM_BYTES (-D)"
#endif
static_assert(SG_TILE == 128 && SG_THREADS == 256, "gemm_simt.cuh: 16 x 16 threads of 8 x 8 outputs");
#define SG_BM SG_TILE
#define SG_BN SG_TILE
static_assert(SG_SMEM_BYTES == 2 * 2 * SG_BK * (SG_TILE + SG_PAD) * 4, "gemm_simt.cuh: SG_SMEM_BYTES is not the "
                                                                       "size of both operands' two k-tile buffers");
// Blocks per SM the compiler must fit (__launch_bounds__): the host's choice per layout
// (cupy_ops/ops/gemm_plan.py SIMT_OCCUPANCY) on compute capability 9.0 and newer; 1 below, where
// NVRTC 13.0 spilled at the 128-register cap of 2 (sm_80).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define SG_MIN_BLOCKS(BLOCKS) 1
#else
#define SG_MIN_BLOCKS(BLOCKS) (BLOCKS)
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

// DYN_SMEM: the tiles in dynamic shared memory (SG_SMEM_BYTES, passed by the launch) instead
// of static arrays. Same layout and arithmetic, but at the 128-register cap of 2 blocks per SM
// ptxas schedules the fragment loads differently by how the tiles are declared (H100,
// docs/gemm.md#simt-occupancy): A K-major, B N-major at 2 blocks:
// dynamic 0.94x torch at 4096^3, static 0.79x; B K-major: static 0.88x, dynamic 0.82x. The host
// picks per layout (SIMT_OCCUPANCY).
template <bool A_KMAJOR, bool B_KMAJOR, int BK, bool DYN_SMEM, class Epi>
__device__ __forceinline__ void gemm_simt_block(const float* __restrict__ A, i64 lda, const float* __restrict__ B,
                                          i64 ldb, float* __restrict__ C, i64 ldc, int M, int N, int K, int vec,
                                          const Epi& epi) {
  using Tile = float[BK][SG_BM + SG_PAD];
  Tile* As;   // [2]: the two buffers of A's k-tile
  Tile* Bs;
  if constexpr (DYN_SMEM) {
    extern __shared__ __align__(16) float sg_smem[];
    As = reinterpret_cast<Tile*>(sg_smem);
    Bs = As + 2;
  } else {
    __shared__ alignas(16) Tile as_[2], bs_[2];
    As = as_;
    Bs = bs_;
  }
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
  // This thread's A and B values of k-row k of buffer buf.
  auto frag = [&](int buf, int k, float* a, float* b) {
    const F4 a0 = *reinterpret_cast<const F4*>(&As[buf][k][ty * 4]);
    const F4 a1 = *reinterpret_cast<const F4*>(&As[buf][k][ty * 4 + 64]);
    const F4 b0 = *reinterpret_cast<const F4*>(&Bs[buf][k][tx * 4]);
    const F4 b1 = *reinterpret_cast<const F4*>(&Bs[buf][k][tx * 4 + 64]);
    a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w; a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
    b[0] = b0.x; b[1] = b0.y; b[2] = b0.z; b[3] = b0.w; b[4] = b1.x; b[5] = b1.y; b[6] = b1.z; b[7] = b1.w;
  };

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
      float a[8], b[8];
      frag(cur, k, a, b);
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
      for (int j = 0; j < 4; ++j) v[j] = n + j < N ? epi(acc[i][h * 4 + j], m, n + j) : 0.f;
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
