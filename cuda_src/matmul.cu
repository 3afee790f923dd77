// matmul, naive reference kernel: C = A @ B for 2-D A (M, K) and B (K, N), any strides.
#include "gemm_naive.cuh"

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
