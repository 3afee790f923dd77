// The naive reference GEMM: one thread per output element, accumulation in fp32 (fp64 for
// double), operands read through arbitrary strides (so transposed and sliced views need
// no copy). Deliberately simple: it is the reference the fast kernels are checked against.
#pragma once
#include "common.cuh"

// C[m, n] = epi(sum_k A[m, k] * B[k, n], m, n); A, B addressed by element strides, C row-major
// with leading dimension ldc. Block (16, 16): threadIdx.x runs along n so that B and C
// accesses coalesce. gridDim.y is capped at 65535 by the hardware, hence the loop over m.
template <class T, class Epi>
__device__ __forceinline__ void gemm_naive_block(const typename Traits<T>::Bits* a, i64 sam, i64 sak,
                                           const typename Traits<T>::Bits* b, i64 sbk, i64 sbn,
                                           typename Traits<T>::Bits* c, i64 ldc, i64 M, i64 N,
                                           i64 K, const Epi& epi) {
  typedef typename Traits<T>::Acc Acc;
  const i64 n = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (n >= N) return;
  for (i64 m = (i64)blockIdx.y * blockDim.y + threadIdx.y; m < M; m += (i64)gridDim.y * blockDim.y) {
    // NOTES: fused multiply-adds without FTZ (the kernels build with -ftz=true; torch keeps a
    // denormal product or sum), in runs of NAIVE_CHUNK whose sums are then added: the error of
    // a long K grows as K / NAIVE_CHUNK + NAIVE_CHUNK, not K (geometry.py)
    Acc acc = 0;
    for (i64 k0 = 0; k0 < K; k0 += NAIVE_CHUNK) {
      const i64 k1 = k0 + NAIVE_CHUNK < K ? k0 + NAIVE_CHUNK : K;
      Acc run = 0;
      for (i64 k = k0; k < k1; ++k) run = fma_exact(to_acc<T>(a[m * sam + k * sak]), to_acc<T>(b[k * sbk + n * sbn]), run);
      acc = k0 == 0 ? run : add_exact(acc, run);
    }
    c[m * ldc + n] = from_acc<T>(epi(acc, m, n));
  }
}
