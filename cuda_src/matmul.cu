// matmul: C = A @ B for 2-D A (M, K) and B (K, N).
//   matmul_naive<T>: the reference kernel, one thread per output, any strides.
//   matmul_simt<A_KMAJOR, B_KMAJOR, BK>: tiled fp32 on the CUDA cores (gemm_simt.cuh).
//   matmul_tc<T>: tensor cores, bf16 / fp16 / TF32 (gemm_tc.cuh); b given as (N, K) K-major.
#include "gemm_naive.cuh"
#include "gemm_simt.cuh"
#include "gemm_tc.cuh"
#include "gemm_epilogue.cuh"

template <class T>
__global__ void matmul_naive(const typename Traits<T>::Bits* a, i64 sam, i64 sak,
                             const typename Traits<T>::Bits* b, i64 sbk, i64 sbn,
                             typename Traits<T>::Bits* c, i64 M, i64 N, i64 K) {
  gemm_naive<T>(a, sam, sak, b, sbk, sbn, c, N, M, N, K, Identity<T>());
}

// lda, ldb: leading dimensions (see gemm_simt.cuh for the layouts); c is row-major (M, N).
template <bool A_KMAJOR, bool B_KMAJOR, int BK>
__global__ void __launch_bounds__(SG_THREADS, SG_MIN_BLOCKS) matmul_simt(const float* a, i64 lda, const float* b, i64 ldb,
                                                           float* c, int M, int N, int K, int vec) {
  gemm_simt<A_KMAJOR, B_KMAJOR, BK>(a, lda, b, ldb, c, N, M, N, K, vec, Identity<float>());
}

// a (M, K) row-major (lda), bt = B transposed, (N, K) row-major (ldb); c row-major (M, N).
// Dynamic shared memory: gemm_tc_smem<T>() bytes.
template <class T>
__global__ void __launch_bounds__(TC_THREADS) matmul_tc(const typename Traits<T>::Bits* a, i64 lda,
                                                         const typename Traits<T>::Bits* bt, i64 ldb,
                                                         typename Traits<T>::Bits* c, int M, int N, int K) {
  gemm_tc<T>(a, lda, bt, ldb, c, N, M, N, K, Identity<T>());
}
