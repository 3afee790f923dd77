// Epilogues of the GEMM kernels: functors applied to each fp32 (fp64) accumulator with its
// output column n before the store.
#pragma once
#include "common.cuh"

// matmul: the product as is.
template <class T>
struct Identity {
  typedef typename Traits<T>::Acc Acc;
  __device__ __forceinline__ Acc operator()(Acc v, i64) const { return v; }
};

// Split-K: the sum of output i's partial products over the slices of a (slices, M, N) fp32
// workspace (mn = M N), in slice order (deterministic), without flushing denormals.
__device__ __forceinline__ float splitk_sum(const float* ws, i64 i, i64 mn, int slices) {
  float s = ws[i];
  for (int z = 1; z < slices; ++z) s = add_exact(s, ws[z * mn + i]);
  return s;
}

// linear_relu_div: relu(v + bias[n]) * scale, with scale = 1 / divisor as torch computes it
// (see relu_div.cu); bias may be null (nn.Linear(bias=False)).
template <class T>
struct BiasReluScale {
  typedef typename Traits<T>::Bits Bits;
  typedef typename Traits<T>::Acc Acc;
  const Bits* bias;
  Acc scale;
  __device__ __forceinline__ Acc operator()(Acc v, i64 n) const {
    if (bias) v += to_acc<T>(bias[n]);
    v = to_acc<T>(from_acc<T>(v));  // torch rounds the Linear output to the dtype first
    const Acc r = to_acc<Acc>(relu_bits<Acc>(from_acc<Acc>(v)));
    return mul_exact(r, scale);
  }
};
