// Epilogues of the GEMM kernels: functors applied to each fp32 (fp64) accumulator with its
// output column n before the store. The host names one by its tag, the last template argument
// of every GEMM kernel (cupy_ops/ops/gemm_plan.py EPILOGUES); every kernel takes the same
// two arguments for it, (bias, scale), unused by EpiNone. epi(v, n) = epi.apply(v,
// epi.column(n)): a kernel whose stores are asm statements with a memory clobber (which the
// compiler may not move a load across) reads a batch of columns' parameters first and then
// applies them (gemm_wgmma.cuh; one load each otherwise waits on the store before it).
#pragma once
#include "common.cuh"

struct EpiNone;            // matmul: the product as is
struct EpiBiasReluScale;   // linear_relu_div: relu(v + bias[n]) * scale

template <class T, class Tag> struct Epilogue;

template <class T>
struct Epilogue<T, EpiNone> {
  typedef typename Traits<T>::Acc Acc;
  __device__ __forceinline__ Epilogue(const typename Traits<T>::Bits*, double) {}
  __device__ __forceinline__ Acc column(i64) const { return Acc(0); }
  __device__ __forceinline__ Acc apply(Acc v, Acc) const { return v; }
  __device__ __forceinline__ Acc operator()(Acc v, i64) const { return v; }
};

// relu(v + bias[n]) * scale, with scale = 1 / divisor as torch computes it (see relu_div.cu;
// the host passes it as a double that is exact in Acc); bias may be null (nn.Linear(bias=False)).
template <class T>
struct Epilogue<T, EpiBiasReluScale> {
  typedef typename Traits<T>::Bits Bits;
  typedef typename Traits<T>::Acc Acc;
  const Bits* bias;
  Acc scale;
  __device__ __forceinline__ Epilogue(const Bits* b, double s) : bias(b), scale((Acc)s) {}
  // column n's bias (0 without one: apply does not add it, so -0.0 stays -0.0 as in torch)
  __device__ __forceinline__ Acc column(i64 n) const { return bias ? to_acc<T>(bias[n]) : Acc(0); }
  __device__ __forceinline__ Acc apply(Acc v, Acc b) const {
    if (bias) v += b;
    v = to_acc<T>(from_acc<T>(v));  // torch rounds the Linear output to the dtype first
    const Acc r = to_acc<Acc>(relu_bits<Acc>(from_acc<Acc>(v)));
    return mul_exact(r, scale);
  }
  __device__ __forceinline__ Acc operator()(Acc v, i64 n) const { return apply(v, column(n)); }
};

// Split-K: the sum of output i's partial products over the slices of a (slices, M, N) fp32
// workspace (mn = M N), in slice order (deterministic), without flushing denormals.
__device__ __forceinline__ float splitk_sum(const float* ws, i64 i, i64 mn, int slices) {
  float s = ws[i];
  for (int z = 1; z < slices; ++z) s = add_exact(s, ws[z * mn + i]);
  return s;
}
