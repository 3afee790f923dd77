// Elementwise loop shared by relu and relu_div: one pass, each block a contiguous chunk.
//
// Launch shape (chosen by the host, cupy_ops/ops/_elementwise.py): 128 threads a block, each
// thread VECS_PER_THREAD 16-byte vectors, blocks = ceil(vectors / (128 * VECS_PER_THREAD)).
// Measured on an H200 (notes/elementwise_tuning.md): this one-shot shape reaches 98-100 % of
// a device-to-device copy for fp32 and fp16 at 32 MB and 1 GB, where a device-sized
// grid-stride loop reached 92-95 %.
//
// The host passes `vec` = 1 only when x and y sit at the same offset modulo 16 bytes: then
// block 0 also does a scalar head (bringing both to a 16-byte boundary) and a scalar tail,
// and the body moves 16-byte vectors. Otherwise (e.g. x = t[1:] into a fresh output) every
// element goes through the scalar path, 8 elements a thread. All loads of a thread
// are issued before its first store. Indices are 64-bit: more than 2**31 elements work.
#pragma once
#include "common.cuh"

#define VECS_PER_THREAD 2

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
  constexpr int VEC = 16 / sizeof(Bits);
  constexpr int U = VECS_PER_THREAD;
  if (vec) {
    const i64 nvec = (n - head) / VEC;
    const V16* xv = reinterpret_cast<const V16*>(x + head);
    V16* yv = reinterpret_cast<V16*>(y + head);
    const i64 base = (i64)blockIdx.x * blockDim.x * U + threadIdx.x;
    V16 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < nvec) v[u] = xv[i];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < nvec) yv[i] = apply_vec<Bits>(v[u], op);
    }
    if (blockIdx.x == 0) {  // head (< VEC elements) and tail (< VEC elements)
      if (threadIdx.x < head) y[threadIdx.x] = op(x[threadIdx.x]);
      const i64 t = head + nvec * VEC + threadIdx.x;
      if (threadIdx.x < VEC && t < n) y[t] = op(x[t]);
    }
  } else {
    // 8 elements per thread: as many bytes as the vector path for fp32; for 16-bit types
    // more would raise the registers of the whole kernel (and so cut the vector path's
    // occupancy) from ~40 to ~80.
    constexpr int S = 8;
    const i64 base = (i64)blockIdx.x * blockDim.x * S + threadIdx.x;
    Bits v[S];
#pragma unroll
    for (int u = 0; u < S; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < n) v[u] = x[i];
    }
#pragma unroll
    for (int u = 0; u < S; ++u) {
      const i64 i = base + (i64)u * blockDim.x;
      if (i < n) y[i] = op(v[u]);
    }
  }
}
