// matmul: C = A @ B for 2-D A (M, K) and B (K, N).
//   matmul_naive<T>: the reference kernel, one thread per output, any strides.
//   matmul_simt<A_KMAJOR, B_KMAJOR>: tiled fp32 on the CUDA cores (gemm_simt.cuh).
#include "gemm_naive.cuh"
#include "gemm_simt.cuh"

template <class T>
struct Identity {
  typedef typename Traits<T>::Acc Acc;
  __device__ __forceinline__ Acc operator()(Acc v, i64) const { return v; }
};

template <class T>
__global__ void matmul_naive(const typename Traits<T>::Bits* a, i64 sam, i64 sak,
                             const typename Traits<T>::Bits* b, i64 sbk, i64 sbn,
                             typename Traits<T>::Bits* c, i64 M, i64 N, i64 K) {
  gemm_naive<T>(a, sam, sak, b, sbk, sbn, c, N, M, N, K, Identity<T>());
}

// lda, ldb: leading dimensions (see gemm_simt.cuh for the layouts); c is row-major (M, N).
template <bool A_KMAJOR, bool B_KMAJOR, int BK>
__global__ void __launch_bounds__(SG_THREADS, 2) matmul_simt(const float* a, i64 lda, const float* b, i64 ldb,
                                                           float* c, int M, int N, int K, int vec) {
  gemm_simt<A_KMAJOR, B_KMAJOR, BK>(a, lda, b, ldb, c, N, M, N, K, vec, Identity<float>());
}
