// linear_relu_div_naive<T>: the naive fused kernel; linear_relu_div_simt<X_KMAJOR, W_KMAJOR>:
// the tiled fp32 kernel (gemm_simt.cuh) with the same epilogue. Both compute y = relu(x @ weight.T + bias) * scale, where
// scale = 1 / divisor as torch computes it (see relu_div.cu). weight is (N, K) as in
// nn.Linear; bias may be null (nn.Linear(bias=False)).
#include "gemm_naive.cuh"
#include "gemm_simt.cuh"
#include "gemm_tc.cuh"
#include "gemm_epilogue.cuh"

template <class T>
__global__ void linear_relu_div_naive(const typename Traits<T>::Bits* x, i64 sxm, i64 sxk,
                                      const typename Traits<T>::Bits* w, i64 swn, i64 swk,
                                      const typename Traits<T>::Bits* bias,
                                      typename Traits<T>::Bits* y, i64 M, i64 N, i64 K,
                                      typename Traits<T>::Acc scale) {
  BiasReluScale<T> epi;
  epi.bias = bias;
  epi.scale = scale;
  gemm_naive<T>(x, sxm, sxk, w, swk, swn, y, N, M, N, K, epi);
}

// x (M, K) and weight (N, K) with leading dimensions ldx, ldw: X_KMAJOR when x is row-major,
// W_KMAJOR when weight is (the nn.Linear layout). y is row-major (M, N).
template <bool X_KMAJOR, bool W_KMAJOR, int BK>
__global__ void __launch_bounds__(SG_THREADS, SG_MIN_BLOCKS(X_KMAJOR, W_KMAJOR)) linear_relu_div_simt(const float* x, i64 ldx, const float* w, i64 ldw,
                                                                    const float* bias, float* y, int M, int N, int K,
                                                                    int vec, float scale) {
  BiasReluScale<float> epi;
  epi.bias = reinterpret_cast<const u32*>(bias);
  epi.scale = scale;
  gemm_simt<X_KMAJOR, W_KMAJOR, BK>(x, ldx, w, ldw, y, N, M, N, K, vec, epi);
}

// Split-K epilogue: y (M, N) = epi(sum over z of ws[z][m][n]) for the slices matmul_simt or
// matmul_wgmma_partial wrote (x as a, weight as the K-major b), z in order.
template <class T>
__global__ void linear_relu_div_splitk_reduce(const float* ws, const typename Traits<T>::Bits* bias,
                                              typename Traits<T>::Bits* y, int M, int N, int slices, float scale) {
  BiasReluScale<T> epi;
  epi.bias = bias;
  epi.scale = scale;
  const i64 mn = (i64)M * N;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < mn; i += (i64)gridDim.x * blockDim.x)
    y[i] = from_acc<T>(epi(splitk_sum(ws, i, mn, slices), i % N));
}

// Tensor-core form (gemm_tc.cuh): x (M, K) and weight (N, K), both row-major with 16-byte
// aligned rows; bf16 / fp16, or fp32 rounded to TF32. Dynamic shared memory: gemm_tc_smem<T>().
template <class T>
__global__ void __launch_bounds__(TC_THREADS) linear_relu_div_tc(const typename Traits<T>::Bits* x, i64 ldx,
                                                                  const typename Traits<T>::Bits* w, i64 ldw,
                                                                  const typename Traits<T>::Bits* bias,
                                                                  typename Traits<T>::Bits* y, int M, int N, int K,
                                                                  typename Traits<T>::Acc scale) {
  BiasReluScale<T> epi;
  epi.bias = bias;
  epi.scale = scale;
  gemm_tc<T>(x, ldx, w, ldw, y, N, M, N, K, epi);
}
