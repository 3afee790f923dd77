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
// Split-K: block z of the grid's third dimension multiplies the K range [z kslice, (z + 1)
// kslice) into the z-th (M, N) slice of c (a workspace, summed by matmul_splitk_reduce or
// linear_relu_div_splitk_reduce); without split, kslice >= K and gridDim.z == 1.
// One block per SM for every layout: at the 128-register cap of 2 blocks, the slice offsets
// made the K-major-B variants spill (sm_90, NVRTC 13.5: 44-48 bytes).
template <bool A_KMAJOR, bool B_KMAJOR, int BK>
__global__ void __launch_bounds__(SG_THREADS, 1) matmul_simt(const float* a, i64 lda, const float* b, i64 ldb,
                                                           float* c, int M, int N, int K, int vec, int kslice) {
  const int k0 = blockIdx.z * kslice;
  a += A_KMAJOR ? (i64)k0 : (i64)k0 * lda;
  b += B_KMAJOR ? (i64)k0 : (i64)k0 * ldb;
  gemm_simt<A_KMAJOR, B_KMAJOR, BK>(a, lda, b, ldb, c + (i64)blockIdx.z * M * N, N, M, N, min(kslice, K - k0), vec,
                                    Identity<float>());
}

// c (mn elements of T) = the sum of the split-K slices of ws (splitk_sum), rounded to T.
template <class T>
__global__ void matmul_splitk_reduce(const float* ws, typename Traits<T>::Bits* c, i64 mn, int slices) {
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < mn; i += (i64)gridDim.x * blockDim.x)
    c[i] = from_acc<T>(splitk_sum(ws, i, mn, slices));
}

// a (M, K) row-major (lda), bt = B transposed, (N, K) row-major (ldb); c row-major (M, N).
// Dynamic shared memory: gemm_tc_smem<T>() bytes.
template <class T>
__global__ void __launch_bounds__(TC_THREADS) matmul_tc(const typename Traits<T>::Bits* a, i64 lda,
                                                         const typename Traits<T>::Bits* bt, i64 ldb,
                                                         typename Traits<T>::Bits* c, int M, int N, int K) {
  gemm_tc<T>(a, lda, bt, ldb, c, N, M, N, K, Identity<T>());
}
