// Epilogues of the GEMM kernels: functors applied to each fp32 (fp64) accumulator with its
// output column n before the store. The host names one by its tag, the last template argument
// of every GEMM kernel (cupy_ops/ops/gemm/common.py EPILOGUES); every kernel takes the same
// two arguments for it, (bias, scale), unused by EpiNone. epi(v, n) = epi.apply(v,
// epi.column(n)): the Hopper kernels read a round of columns' parameters first, cooperatively
// (gemm_wgmma.cuh epi_columns), then apply them; COLUMNS says whether there are any to read.
#pragma once
#include "common.cuh"

struct EpiNone;            // matmul: the product as is
struct EpiBiasReluScale;   // linear_relu_div: relu(v + bias[n]) * scale

template <class T, class Tag> struct Epilogue;

// The host's double scale in the compute type, exactly: the default conversion under -ftz=true
// flushes a subnormal fp32 scale (|divisor| > 2^126) to 0, where torch multiplies by it.
template <class Acc> __device__ __forceinline__ Acc scale_from(double s);
template <> __device__ __forceinline__ float scale_from<float>(double s) {
  float r;
  asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(s));
  return r;
}
template <> __device__ __forceinline__ double scale_from<double>(double s) { return s; }

template <class T>
struct Epilogue<T, EpiNone> {
  typedef typename Traits<T>::Acc Acc;
  static constexpr bool COLUMNS = false;
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
  static constexpr bool COLUMNS = true;
  const Bits* bias;
  Acc scale;
  __device__ __forceinline__ Epilogue(const Bits* b, double s) : bias(b), scale(scale_from<Acc>(s)) {}
  // column n's bias; -0.0 without one (nn.Linear(bias=False)): x + -0.0 is x for every x,
  // -0.0 and NaN included, so apply adds unconditionally (no branch per value) and torch's
  // -0.0 stays -0.0
  __device__ __forceinline__ Acc column(i64 n) const { return bias ? to_acc<T>(bias[n]) : -Acc(0); }
  __device__ __forceinline__ Acc apply(Acc v, Acc b) const {
    // torch rounds the Linear output to the dtype first; the add keeps denormals (the kernels
    // build with -ftz=true)
    v = to_acc<T>(from_acc<T>(add_exact(v, b)));
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
