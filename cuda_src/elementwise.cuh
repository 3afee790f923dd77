// Elementwise loop shared by relu and relu_div: one pass, each block a contiguous chunk.
//
// Launch shape (chosen by the host, cupy_ops/ops/elementwise.py, which passes the per-thread
// counts as -D defines): each thread EW_VECS_PER_THREAD 16-byte vectors, blocks =
// ceil(vectors / (blockDim.x * EW_VECS_PER_THREAD)). Measured on an H200 (docs/design.md#elementwise):
// this one-shot shape reaches 98-100 % of a device-to-device copy for fp32 and fp16 at 32 MB
// and 1 GB, where a device-sized grid-stride loop reached 92-95 %.
//
// The host passes `vec` = 1 only when x and y sit at the same offset modulo 16 bytes: then
// block 0 also does a scalar head (bringing both to a 16-byte boundary) and a scalar tail,
// and the body moves 16-byte vectors. Otherwise (e.g. x = t[1:] into a fresh output) every
// element goes through the scalar path, EW_SCALAR_PER_THREAD elements a thread. All loads of a thread
// are issued before its first store. Indices are 64-bit: more than 2**31 elements work.
#pragma once
#include "common.cuh"

#if !defined(EW_VECS_PER_THREAD) || !defined(EW_SCALAR_PER_THREAD)
#error "elementwise.cuh: the host passes EW_VECS_PER_THREAD and EW_SCALAR_PER_THREAD (-D)"
#endif

struct alignas(16) V16 { u32 w[4]; };

// Unary ops are called as op(x); binary ones (ARITY 2, e.g. the backward kernels) as op(x, x2).
template <int ARITY, class Bits, class Op>
__device__ __forceinline__ Bits apply1(const Op& op, Bits a, Bits b) {
  if constexpr (ARITY == 2) return op(a, b); else return op(a);
}

template <int ARITY, class Bits, class Op>
__device__ __forceinline__ V16 apply_vec(V16 v, V16 w, const Op& op) {
  constexpr int VEC = 16 / sizeof(Bits);
  union { V16 v; Bits e[VEC]; } u, u2;
  u.v = v;
  u2.v = w;
#pragma unroll
  for (int j = 0; j < VEC; ++j) u.e[j] = apply1<ARITY>(op, u.e[j], u2.e[j]);
  return u.v;
}

// y[i] = op(x[i]) (ARITY 1) or op(x[i], x2[i]) (ARITY 2, x2 equally aligned as x and y).
template <int ARITY, class Bits, class Op>
__device__ __forceinline__ void elementwise_loop(const Bits* x, const Bits* x2, Bits* y, i64 n, i64 head,
                                                 int vec, const Op& op) {
  constexpr int VEC = 16 / sizeof(Bits);
  constexpr int U = EW_VECS_PER_THREAD;
  if (vec) {
    const i64 nvec = (n - head) / VEC;
    const V16* xv = reinterpret_cast<const V16*>(x + head);
    const V16* x2v = reinterpret_cast<const V16*>(x2 + head);
    V16* yv = reinterpret_cast<V16*>(y + head);
    const i64 base = (i64)blockIdx.x * blockDim.x * U + threadIdx.x;
    V16 v[U], w[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < nvec) {
        v[u] = xv[i];
        if constexpr (ARITY == 2) w[u] = x2v[i];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < nvec) yv[i] = apply_vec<ARITY, Bits>(v[u], w[u], op);
    }
    if (blockIdx.x == 0) {  // head (< VEC elements) and tail (< VEC elements)
      if (threadIdx.x < head) {
        const i64 t = threadIdx.x;
        y[t] = apply1<ARITY>(op, x[t], ARITY == 2 ? x2[t] : (Bits)0);
      }
      const i64 t = head + nvec * VEC + threadIdx.x;
      if (threadIdx.x < VEC && t < n) y[t] = apply1<ARITY>(op, x[t], ARITY == 2 ? x2[t] : (Bits)0);
    }
  } else {
    // 8 elements per thread: as many bytes as the vector path for fp32; for 16-bit types
    // 16 would raise the registers of the whole kernel (and so cut the vector path's
    // occupancy) from ~40 to ~80.
    constexpr int S = EW_SCALAR_PER_THREAD;
    const i64 base = (i64)blockIdx.x * blockDim.x * S + threadIdx.x;
    Bits v[S], w[S];
#pragma unroll
    for (int u = 0; u < S; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < n) {
        v[u] = x[i];
        if constexpr (ARITY == 2) w[u] = x2[i];
      }
    }
#pragma unroll
    for (int u = 0; u < S; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < n) y[i] = apply1<ARITY>(op, v[u], w[u]);
    }
  }
}
