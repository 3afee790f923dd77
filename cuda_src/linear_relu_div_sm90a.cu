// linear_relu_div on Hopper (compiled for sm_90a only; cupy_ops/ops/linear_relu_div.py picks
// it on compute capability 9.0): y = relu(x @ weight.T + bias) * scale with wgmma + TMA
// (gemm_wgmma.cuh) and the epilogue of gemm_epilogue.cuh.
//   x_map covers x (M, K) row-major, w_map weight (N, K) row-major (nn.Linear's layout);
//   bias (N,) or null; y row-major (M, N), ldy. bf16 / fp16, or fp32 read as TF32.
// Dynamic shared memory: WgRing<BN>::SMEM bytes; block WG_THREADS; grid (cdiv(N, BN), cdiv(M, 128)).
#include "gemm_wgmma.cuh"
#include "gemm_epilogue.cuh"

template <class T, int BN>
__global__ void __launch_bounds__(WG_THREADS, 1) linear_relu_div_wgmma(const __grid_constant__ TmaMap x_map,
                                                                       const __grid_constant__ TmaMap w_map,
                                                                       const typename Traits<T>::Bits* bias,
                                                                       typename Traits<T>::Bits* y, i64 ldy, int M,
                                                                       int N, int K, typename Traits<T>::Acc scale) {
  BiasReluScale<T> epi;
  epi.bias = bias;
  epi.scale = scale;
  gemm_wgmma<T, false, BN, T>(&x_map, &w_map, y, ldy, M, N, 0, K, epi);
}
