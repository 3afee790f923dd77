// Epilogues of the GEMM kernels: functors applied to each fp32 (fp64) accumulator of output
// (m, n) before the store. The host names one by its tag, the last template argument of every
// GEMM kernel (cupy_ops/ops/gemm/epilogues.py); every kernel takes one argument for it, an
// EpiArgs by value. epi(v, m, n) = epi.apply(v, epi.column(n), m, n): the Hopper kernels read
// a round of columns' parameters first, cooperatively (gemm_wgmma.cuh epi_columns), then apply
// them; COLUMNS says whether there are any to read (the Linear's bias, a user's columns).
// NOTES: a user's epilogue (cupy_ops.epilogue) is compiled after this file as one more
// specialization of Epilogue (epilogues.py writes it), so every family takes it unchanged.
#pragma once
#include "common.cuh"

// What an epilogue reads (EPI_PTRS, EPI_SCALARS: the host's, -D): ptr[0] the Linear's bias
// (null: none), the others a user epilogue's vectors and tensors, ld[i] a tensor's row stride
// in elements; scalar[i] its numbers as doubles (exact); C's M, N. Every kernel takes it last,
// after the bias and the first scalar again as parameters of their own, which the built-in
// epilogues read.
// NOTES: read from the struct, bias and scale stayed in registers through the main loop and
// the SIMT kernel at 2 blocks per SM spilled 40 bytes (sm_90); as scalar parameters they are
// read from the constant bank where they are used.
struct EpiArgs {
  const void* ptr[EPI_PTRS];
  i64 ld[EPI_PTRS];
  double scalar[EPI_SCALARS];
  i64 M, N;
};
static_assert(sizeof(EpiArgs) == EPI_ARGS_BYTES, "the host packs EpiArgs as EPI_ARGS_BYTES bytes");

struct EpiNone;   // matmul: the product as is
// The others are declarations compiled after the GEMM sources (cupy_ops/ops/gemm/epilogues.py):
// linear_relu_div's EpiBiasReluScale, relu(v + bias[n]) * scale, and users' epilogues.

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

// Col, what an epilogue reads of one column: the bias alone (Acc), or with it a user
// epilogue's column tensors (Cols): column(n) reads them all, so that the Hopper kernels load
// them cooperatively ahead of the store (gemm_wgmma.cuh epi_load) and apply reads none.
// NOTES: read by apply itself, one column of a user's cost its layer 3.7 % (float32) and 7.0 %
// (bfloat16) of the GEMM, against 0.0 for the bias loaded ahead (1024 x 8192 x 8192, H200).
template <class A, int K> struct Cols {
  A v[K];
};
__device__ __forceinline__ float shfl_col(float x, int src) { return __shfl_sync(0xffffffffu, x, src); }
template <class A, int K> __device__ __forceinline__ Cols<A, K> shfl_col(const Cols<A, K>& x, int src) {
  Cols<A, K> r;
#pragma unroll
  for (int k = 0; k < K; ++k) r.v[k] = __shfl_sync(0xffffffffu, x.v[k], src);
  return r;
}

template <class T>
struct Epilogue<T, EpiNone> {
  typedef typename Traits<T>::Acc Acc;
  typedef Acc Col;
  static constexpr bool COLUMNS = false;
  __device__ __forceinline__ Epilogue(const void*, double, const EpiArgs&) {}
  __device__ __forceinline__ Acc column(i64) const { return Acc(0); }
  __device__ __forceinline__ Acc apply(Acc v, Acc, i64, i64) const { return v; }
  __device__ __forceinline__ Acc operator()(Acc v, i64, i64) const { return v; }
};

// The Linear's bias of column n, -0.0 without one (nn.Linear(bias=False)): x + -0.0 is x for
// every x, -0.0 and NaN included, so the add is unconditional (no branch per value) and
// torch's -0.0 stays -0.0.
template <class T> __device__ __forceinline__ typename Traits<T>::Acc linear_bias(const void* bias, i64 n) {
  typedef typename Traits<T>::Acc Acc;
  return bias ? to_acc<T>(static_cast<const typename Traits<T>::Bits*>(bias)[n]) : -Acc(0);
}
// torch's Linear output: v + bias rounded to the dtype (the add keeps denormals: the kernels
// build with -ftz=true)
template <class T> __device__ __forceinline__ typename Traits<T>::Acc linear_out(typename Traits<T>::Acc v,
                                                                               typename Traits<T>::Acc b) {
  return to_acc<T>(from_acc<T>(add_exact(v, b)));
}

// Split-K: the sum of output i's partial products over the slices of a (slices, M, N) fp32
// workspace (mn = M N), in slice order (deterministic), without flushing denormals.
__device__ __forceinline__ float splitk_sum(const float* ws, i64 i, i64 mn, int slices) {
  float s = ws[i];
  for (int z = 1; z < slices; ++z) s = add_exact(s, ws[z * mn + i]);
  return s;
}
