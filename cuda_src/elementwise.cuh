// Grid-stride loop shared by the elementwise kernels (relu, relu_div).
//
// The host passes `vec` = 1 only when x and y sit at the same offset modulo 16 bytes: then a
// scalar head brings both to a 16-byte boundary, the body moves 16-byte vectors, and a scalar
// tail finishes. Otherwise (e.g. x = t[1:] into a fresh output) every element goes through
// the scalar loop. Each thread keeps UNROLL independent loads in flight before the first
// store, which memory-bound loops need to cover DRAM latency. Indices are 64-bit: tensors
// with more than 2**31 elements are supported.
#pragma once
#include "common.cuh"

struct alignas(16) V16 { u32 w[4]; };

template <class Bits, class Op>
__device__ __forceinline__ V16 apply_vec(V16 v, const Op& op) {
  constexpr int VEC = 16 / sizeof(Bits);
  union { V16 v; Bits e[VEC]; } u;
  u.v = v;
#pragma unroll
  for (int j = 0; j < VEC; ++j) u.e[j] = op(u.e[j]);
  return u.v;
}

template <class Bits, class Op>
__device__ __forceinline__ void elementwise_loop(const Bits* x, Bits* y, i64 n, i64 head, int vec,
                                                 const Op& op) {
  constexpr int UNROLL = 4;
  const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  const i64 nthreads = (i64)gridDim.x * blockDim.x;
  if (vec) {
    constexpr int VEC = 16 / sizeof(Bits);
    if (tid < head) y[tid] = op(x[tid]);
    const i64 nvec = (n - head) / VEC;
    const V16* xv = reinterpret_cast<const V16*>(x + head);
    V16* yv = reinterpret_cast<V16*>(y + head);
    i64 i = tid;
    for (; i + (UNROLL - 1) * nthreads < nvec; i += UNROLL * nthreads) {
      V16 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = xv[i + u * nthreads];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) yv[i + u * nthreads] = apply_vec<Bits>(v[u], op);
    }
    for (; i < nvec; i += nthreads) yv[i] = apply_vec<Bits>(xv[i], op);
    const i64 t = head + nvec * VEC + tid;
    if (t < n) y[t] = op(x[t]);
  } else {
    i64 i = tid;
    for (; i + (UNROLL - 1) * nthreads < n; i += UNROLL * nthreads) {
      Bits v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = x[i + u * nthreads];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) y[i + u * nthreads] = op(v[u]);
    }
    for (; i < n; i += nthreads) y[i] = op(x[i]);
  }
}
