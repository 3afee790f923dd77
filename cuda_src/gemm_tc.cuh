// Tensor-core GEMM with mma.sync (sm_80+): bf16 / fp16 operands (m16n8k16) or fp32 operands
// rounded to TF32 (m16n8k8), accumulating in fp32. Used for float16 and bfloat16 always, and
// for float32 only when the user allowed TF32 the torch way.
//
// C[m, n] = epi(sum_k A[m, k] * B[n, k], m, n): both operands K-major (A row-major (M, K), B
// stored (N, K), the nn.Linear weight layout) with rows starting on 16-byte boundaries; the
// host copies an operand into that form when it is not (e.g. matmul's row-major B).
// Block tile 128 x 128 x BK (BK = 32 for 16-bit types, 16 for TF32: 64 bytes), 4 warps as
// 2 x 2, warp tile 64 x 64 (32 mma per k-step against 12 fragment loads). Tiles stream
// through a cp.async pipeline (edges zero-filled) of as many stages as the host's dynamic
// shared memory, TC_SMEM_BYTES, holds (61440: 3), above the 48 KB default, so the host
// raises the kernel's limit. 16-bit fragments come from ldmatrix, TF32
// ones from 32-bit shared loads. Rows are padded by 16 bytes, which keeps both conflict-free.
#pragma once
#include "common.cuh"

// TC_TILE, TC_THREADS and TC_SMEM_BYTES come from the host (cupy_ops/ops/gemm_plan.py), which
// sizes the grid and the launch with them; this layout is written for a 128 x 128 tile of 4 warps.
#if !defined(TC_TILE) || !defined(TC_THREADS) || !defined(TC_SMEM_BYTES)
#error "gemm_tc.cuh: the host passes TC_TILE, TC_THREADS and TC_SMEM_BYTES (-D)"
#endif
static_assert(TC_TILE == 128 && TC_THREADS == 128, "gemm_tc.cuh: 2 x 2 warps of 64 x 64");
#define TC_BM TC_TILE
#define TC_BN TC_TILE
#define TC_ROW_BYTES (64 + 16)   // a k-tile row: 64 bytes of K and 16 of padding (conflict-free)
#define TC_STAGES (TC_SMEM_BYTES / ((TC_BM + TC_BN) * TC_ROW_BYTES))
static_assert(TC_STAGES >= 2, "gemm_tc.cuh: TC_SMEM_BYTES holds fewer than 2 pipeline stages");

template <class T> struct TcCfg;
template <> struct TcCfg<bf16> { static constexpr int BK = 32, KSTEP = 16; };  // BK: 64 bytes of K
template <> struct TcCfg<f16> { static constexpr int BK = 32, KSTEP = 16; };
template <> struct TcCfg<float> { static constexpr int BK = 16, KSTEP = 8; };

// 16-byte async copy global -> shared; bytes beyond `src_bytes` (0..16) are zero-filled.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(u32 r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

template <class T> __device__ __forceinline__ void mma(float d[4], const u32 a[4], const u32 b[2]);
template <> __device__ __forceinline__ void mma<bf16>(float d[4], const u32 a[4], const u32 b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
                 "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void mma<f16>(float d[4], const u32 a[4], const u32 b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
                 "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void mma<float>(float d[4], const u32 a[4], const u32 b[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
                 "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ u32 to_tf32(float f) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(f));
  return r;
}

template <class T, class Epi>
__device__ __forceinline__ void gemm_tc_block(const typename Traits<T>::Bits* __restrict__ A, i64 lda,
                                        const typename Traits<T>::Bits* __restrict__ B, i64 ldb,
                                        typename Traits<T>::Bits* __restrict__ C, i64 ldc, int M, int N, int K,
                                        const Epi& epi) {
  typedef typename Traits<T>::Bits Bits;
  constexpr int BK = TcCfg<T>::BK, KSTEP = TcCfg<T>::KSTEP;
  constexpr int ES = sizeof(Bits);
  constexpr int LD = BK + 16 / ES;               // padded row length, in elements
  static_assert(LD * ES == TC_ROW_BYTES, "gemm_tc.cuh: the stage size assumes TC_ROW_BYTES a row");
  constexpr int CHUNK = 16 / ES;                 // elements per 16-byte copy
  constexpr int CHUNKS = TC_BM * BK / CHUNK;     // 16-byte copies per operand tile
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Bits* As = reinterpret_cast<Bits*>(smem_raw);            // [TC_STAGES][TC_BM][LD]
  Bits* Bs = As + TC_STAGES * TC_BM * LD;                    // [TC_STAGES][TC_BN][LD]
  constexpr int NT = 8;                                      // n8 tiles per warp (64 columns)

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = blockIdx.y * TC_BM, n0 = blockIdx.x * TC_BN;
  const int wm = (warp >> 1) * 64, wn = (warp & 1) * 64;   // warp tile origin in the block tile

  auto load_stage = [&](int stage, int k0) {
#pragma unroll
    for (int i = 0; i < CHUNKS / TC_THREADS; ++i) {
      const int q = tid + i * TC_THREADS;
      const int r = q / (BK / CHUNK), c = (q % (BK / CHUNK)) * CHUNK;
      const int k = k0 + c;
      const int kvalid = max(0, min(CHUNK, K - k)) * ES;
      {
        const int m = m0 + r;
        const bool ok = m < M && kvalid > 0;
        cp_async16(As + (stage * TC_BM + r) * LD + c, ok ? A + (i64)m * lda + k : A, ok ? kvalid : 0);
      }
      {
        const int n = n0 + r;
        const bool ok = n < N && kvalid > 0;
        cp_async16(Bs + (stage * TC_BN + r) * LD + c, ok ? B + (i64)n * ldb + k : B, ok ? kvalid : 0);
      }
    }
    cp_async_commit();
  };

  float acc[4][NT][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.f;

  // Pipeline: tiles 0 .. STAGES-2 in flight before the loop; iteration kt waits for tile kt,
  // then issues tile kt + STAGES - 1 into the stage tile kt - 1 used (every thread is past
  // that tile's reads: the barrier). One commit group per iteration, empty at the end.
  const int ktiles = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < TC_STAGES - 1; ++s) {
    if (s < ktiles) load_stage(s, s * BK);
    else cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt % TC_STAGES;
    cp_async_wait<TC_STAGES - 2>();
    __syncthreads();
    const int next = kt + TC_STAGES - 1;
    if (next < ktiles) load_stage(next % TC_STAGES, next * BK);
    else cp_async_commit();
    const Bits* as = As + cur * TC_BM * LD;
    const Bits* bs = Bs + cur * TC_BN * LD;
#pragma unroll
    for (int ks = 0; ks < BK; ks += KSTEP) {
      u32 af[4][4], bfr[NT][2];
      if constexpr (ES == 2) {
#pragma unroll
        for (int i = 0; i < 4; ++i)   // A 16x16: lanes 0-15 rows 0-15 at k, lanes 16-31 at k + 8
          ldmatrix_x4(af[i], as + (wm + i * 16 + (lane & 15)) * LD + ks + (lane >> 4) * 8);
#pragma unroll
        for (int j = 0; j < NT; j += 2) {  // two n8 tiles: (n 0-7, k 0-7 | 8-15), (n 8-15, ...)
          u32 r[4];
          ldmatrix_x4(r, bs + (wn + j * 8 + (lane >> 4) * 8 + (lane & 7)) * LD + ks + ((lane >> 3) & 1) * 8);
          bfr[j][0] = r[0]; bfr[j][1] = r[1]; bfr[j + 1][0] = r[2]; bfr[j + 1][1] = r[3];
        }
      } else {
        const int g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const Bits* p = as + (wm + i * 16 + g) * LD + ks + t;
          af[i][0] = to_tf32(__uint_as_float(p[0]));
          af[i][1] = to_tf32(__uint_as_float(p[8 * LD]));
          af[i][2] = to_tf32(__uint_as_float(p[4]));
          af[i][3] = to_tf32(__uint_as_float(p[8 * LD + 4]));
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const Bits* p = bs + (wn + j * 8 + g) * LD + ks + t;
          bfr[j][0] = to_tf32(__uint_as_float(p[0]));
          bfr[j][1] = to_tf32(__uint_as_float(p[4]));
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma<T>(acc[i][j], af[i], bfr[j]);
    }
  }
  cp_async_wait<0>();

  // Epilogue. Accumulator (i, j): rows g and g + 8 of m-tile i, columns 2t, 2t + 1 of n-tile j.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + wm + i * 16 + g + h * 8;
      if (m >= M) continue;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int n = n0 + wn + j * 8 + 2 * t;
        Bits* dst = C + (i64)m * ldc + n;
        if (n < N) dst[0] = from_acc<T>(epi(acc[i][j][2 * h], m, n));
        if (n + 1 < N) dst[1] = from_acc<T>(epi(acc[i][j][2 * h + 1], m, n + 1));
      }
    }
}
