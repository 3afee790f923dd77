// Hopper fp32 GEMM with fp32-class accuracy on the fp16 tensor cores ("fp16x3", sm_90a only).
//
// First B's row k (over n) is brought to a largest finite magnitude in [1, 2) by 2^-t[k] and A's
// column k takes 2^+t[k] (or, where A is the smaller operand to read, A's column k by 2^-t[k]
// and B's row k 2^+t[k]): the product is unchanged, exactly, and so is the result under any
// power-of-two scaling along K (A D, D^-1 B). Without it, a row of A whose values span more
// than 2^17 because B's rows are scaled inversely lost its small values' products entirely
// (columns of A scaled by s_k, rows of B by 1/s_k, s_k in 2^+-20: errors 4-8x the largest
// output). Then each fp32 operand row (a row of A; a column of B, i.e. a row of the K-major
// B^T) is scaled by a power of two 2^e that brings its largest finite magnitude into
// [2^14, 2^15), and each scaled value xs is split into two fp16 numbers, xs ~= hi + lo
// (fp16x3_split, one pass over the operand, written to fp16 workspaces). Then
//   C[m, n] = 2^-(ea[m] + eb[n]) * sum_k a_lo b_hi + a_hi b_lo + a_hi b_hi,
// three fp16 wgmmas per k-step: the fp16 tensor cores run at twice the TF32 rate, so the three
// products cost what 1.5 TF32 products do, and the kernel does no splitting of its own
// (3xTF32 spends ~24 % of its time splitting: docs/gemm.md#tf32x3). fp16 has TF32's
// 11-bit significand, so hi + lo is xs to within 2^-21 |xs| as in 3xTF32; the scaling keeps
// every row's values inside fp16's exponent range (a value 2^-38 below its row's largest, or
// less, is lost: its share of any dot product is below fp32's rounding of the row's largest).
//
// Same promotion as gemm_tf32x3.cuh: the wgmmas sum into a partial accumulator that is added
// to the fp32 running sum with add.rn every X3H_PROMOTE_EVERY k-tiles (the tensor cores'
// accumulation is not fp32's).
//
// Block tile WG_BM (128) x BN (128), persistent past a wave, 384 threads: warpgroup 0, one thread, the TMA loads of a
// ring of stages [A_hi | A_lo | B_hi | B_lo] (128 rows x 128 bytes of K each, 128-byte
// swizzle); warpgroups 1, 2 (64 rows each) the wgmmas, both operands from shared memory,
// issuing their k-tiles in turn. Registers: the running sum and the partial, BN / 2 each:
// BN = 128 only (a second partial, to promote one while the other's wgmmas run, passes the
// 168 registers ptxas has for a 384-thread block: it serialized the wgmmas).
#pragma once
#include "gemm_wgmma.cuh"

#if !defined(X3_SMEM_BYTES) || !defined(X3H_SPLIT_THREADS) || !defined(X3H_SPLIT_VECS) || \
    !defined(X3H_NSPLIT_THREADS) || !defined(X3H_NSPLIT_ROWS) || !defined(X3H_COLMAX_ROWS) || \
    !defined(X3H_ROWCOL_THREADS) || !defined(X3H_ROWCOL_VECS) || !defined(X3H_ROWCOL_SOLO_J) || \
    !defined(X3H_ROWCOL_BLOCKS)
#error "gemm_fp16x3.cuh: the host passes X3_SMEM_BYTES, X3H_SPLIT_*, X3H_NSPLIT_*, X3H_COLMAX_ROWS, X3H_ROWCOL_* (-D)"
#endif
static_assert(X3H_SPLIT_THREADS % 32 == 0 && X3H_SPLIT_THREADS <= 1024, "fp16x3_split: whole warps, one block");

// Tuned on H100 (docs/gemm.md#fp16x3; the -D overrides let a tuning build
// set them):
//   X3H_PROMOTE_EVERY: k-tiles per promotion. 2 ran 1.08-1.16x faster than 1 unordered, but
//     its error on rand at 1024^3 was 1.13x torch fp32's (1: 0.55x): 1.
//   X3H_ORDERED: the consumer warpgroups take turns issuing k-tiles (below). 4096^3 matmul
//     0.758 ms against 0.887, the layer 1024x8192x8192 0.927 against 1.033, the same bits;
//     Nsight Compute: tensor pipe 82-84 % of the cycles against 66-69 %.
#ifndef X3H_PROMOTE_EVERY
#define X3H_PROMOTE_EVERY 1
#endif
static_assert(X3H_PROMOTE_EVERY == 1 || X3H_PROMOTE_EVERY == 2, "gemm_fp16x3.cuh: k-tiles per promotion 1 or 2");
#ifndef X3H_ORDERED
#define X3H_ORDERED 1
#endif

template <int BN> struct X3hRing {
  static constexpr int A_BYTES = WG_BM * 128, B_BYTES = BN * 128, STAGE_BYTES = 2 * (A_BYTES + B_BYTES);
  static constexpr int STAGES = (X3_SMEM_BYTES - 1024) / (STAGE_BYTES + 16);
  static_assert(STAGES >= 2, "gemm_fp16x3.cuh: X3_SMEM_BYTES holds fewer than 2 stages");
};

// 2^e as a float for e in [-126, 127].
__device__ __forceinline__ float x3h_pow2(int e) { return __uint_as_float((u32)(e + 127) << 23); }
// v * 2^e without flushing denormals: exact, one rounding where the result is subnormal
// (two where it is and e < -126: a result below 2^-126 from values scaled by 2^-126 first).
__device__ __forceinline__ float x3h_scale(float v, int e) {
  const int e1 = max(-126, min(127, e)), e2 = max(-126, min(127, e - e1));
  return mul_exact(mul_exact(v, x3h_pow2(e1)), x3h_pow2(e2));
}
// The same, one multiply where e is in [-126, 127]: the split's, whose e differs value to value
// (A's split 53 us against 67 at 4096^2, H200). Not the epilogue's: there the branch made the
// GEMM ~5 % slower.
__device__ __forceinline__ float x3h_scale_split(float v, int e) {
  return (u32)(e + 126) <= 253u ? mul_exact(v, x3h_pow2(e)) : x3h_scale(v, e);
}
// Magnitudes compared by their exponents alone, shifted: the key of v times 2^s is
// floor(log2 |v|) + s + X3H_KEY_BIAS for a nonzero finite v, else 0 (none). Keys are positive
// (|s| <= 128 here), so the largest of a row or column is an int max or atomicMax.
#define X3H_KEY_BIAS 1024
__device__ __forceinline__ int x3h_key(float v, int s) {
  const u32 m = __float_as_uint(v) & 0x7fffffffu;
  if (m - 1u >= 0x7f7fffffu) return 0;   // 0, inf or NaN
  // the biased exponent; a subnormal's from its leading bit (floor(log2) = 9 - clz - 127)
  const int e = m >= 0x00800000u ? (int)(m >> 23) : 9 - __clz((int)m);
  return e + s + (X3H_KEY_BIAS - 127);
}
__device__ __forceinline__ int x3h_key4(float4 v, int4 s) {
  return max(max(x3h_key(v.x, s.x), x3h_key(v.y, s.y)), max(x3h_key(v.z, s.z), x3h_key(v.w, s.w)));
}
// The scale exponent of a row whose largest key is `key` (0: none nonzero): that magnitude
// times 2^e lies in [2^14, 2^15), below fp16's largest (65504).
__device__ __forceinline__ int x3h_exponent(int key) { return key == 0 ? 0 : 14 - (key - X3H_KEY_BIAS); }
// t[k] as the split kernels read it: one signed byte, floor(log2) of the largest finite
// magnitude of B's row k or A's column k clamped to [-126, 126] (0 for none; any power of two
// moves exactly, the clamp only leaves rows below 2^-126 less evened out, and keeps 2^+-t a
// normal float: x3h_kfactor4). Bytes: 4 beside each float4 of A's row, a quarter of what the
// int keys took.
#define X3H_T_MAX 126
__device__ __forceinline__ signed char x3h_t(int key) {
  return key == 0 ? 0 : (signed char)max(-X3H_T_MAX, min(X3H_T_MAX, key - X3H_KEY_BIAS));
}
// The shift of index k along K: t[k], or -t[k] (kneg); none without tk.
__device__ __forceinline__ int x3h_kshift(const signed char* __restrict__ tk, i64 k, int kneg) {
  if (tk == nullptr) return 0;
  const int t = tk[k];
  return kneg ? -t : t;
}
// t[k + i], i < 4, from the word of tk that holds them (k % 4 == 0): byte i, sign-extended.
__device__ __forceinline__ int4 x3h_bytes4(int w) {
  return make_int4(w << 24 >> 24, w << 16 >> 24, w << 8 >> 24, w >> 24);
}
__device__ __forceinline__ int4 x3h_kshift4(const signed char* __restrict__ tk, i64 k, int kneg) {   // k % 4 == 0
  if (tk == nullptr) return make_int4(0, 0, 0, 0);
  const int4 b = x3h_bytes4(*reinterpret_cast<const int*>(tk + k));
  const int m = kneg ? -1 : 0;
  const auto t = [m](int v) { return (v ^ m) - m; };   // -v where kneg
  return make_int4(t(b.x), t(b.y), t(b.z), t(b.w));
}

// 2^(+-t[k]) of four consecutive k (k % 4 == 0) as floats (|t| <= X3H_T_MAX: normal), from t's
// bytes by one integer multiply-add each into the exponent field (kone: +-2^23, - for kneg);
// 1 without tk.
__device__ __forceinline__ float4 x3h_kfactor4(const signed char* __restrict__ tk, i64 k, int kone) {
  if (tk == nullptr) return make_float4(1.f, 1.f, 1.f, 1.f);
  int w;   // volatile: read again where needed, not held in registers across the row's max
  asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(w) : "l"(tk + k));
  const int4 b = x3h_bytes4(w);
  const auto f = [kone](int t) { return __int_as_float(0x3f800000 + t * kone); };
  return make_float4(f(b.x), f(b.y), f(b.z), f(b.w));
}
__device__ __forceinline__ float x3h_kfactor(const signed char* __restrict__ tk, i64 k, int kone) {
  return tk == nullptr ? 1.f : __int_as_float(0x3f800000 + tk[k] * kone);
}
// The magnitude of y = x 2^s as its bits: their int max is the largest |y| of a row (positive
// floats order as ints); an infinite x or an x 2^s that overflowed (or a NaN) sends the row to
// the keys (x3h_fast_row), which give the same pieces. x3h_mag4 by max.f32 of magnitudes (not
// flushed; NaN: the other operand): 2 instructions a value where testing x's bits first took 5.
__device__ __forceinline__ int x3h_mag(float y) { return (int)(__float_as_uint(y) & 0x7fffffffu); }
__device__ __forceinline__ float x3h_absmax(float a, float b) {
  float r;
  asm("{ .reg .f32 a, b; abs.f32 a, %1; abs.f32 b, %2; max.f32 %0, a, b; }" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// |v| p rounded up (p a power of two, not flushed): exact where normal, and never 0 for a nonzero
// v, so a largest of 0 is a column of zeros, not of products that underflowed.
__device__ __forceinline__ float x3h_mul_up(float v, float p) {
  float r;
  asm("{ .reg .f32 a; abs.f32 a, %1; mul.rp.f32 %0, a, %2; }" : "=f"(r) : "f"(v), "f"(p));
  return r;
}
__device__ __forceinline__ int x3h_mag4(float4 v, float4 p) {
  return __float_as_int(x3h_absmax(x3h_absmax(mul_exact(v.x, p.x), mul_exact(v.y, p.y)),
                                   x3h_absmax(mul_exact(v.z, p.z), mul_exact(v.w, p.w))));
}
// A row whose largest |y| (x3h_mag) has its biased exponent in [X3H_FAST_MIN, 254] (finite: no
// x infinite, no x 2^s overflowed) is scaled in two exact multiplies, (x 2^s) 2^e, e = 141 - that exponent in
// [-113, 101]: the same bits as the one rounding of x 2^(e+s) wherever they matter (a y that is
// subnormal, rounded, ends below 2^(101 - 126) = 2^-25, where hi = lo = +-2^-24 either way).
// Other rows (all-zero ones too) take the keys and x3h_scale_split.
#define X3H_FAST_MIN 40
__device__ __forceinline__ bool x3h_fast_row(int top) {
  return (u32)((top >> 23) - X3H_FAST_MIN) <= 254u - X3H_FAST_MIN;
}

// xs = x 2^e split into fp16 (hi, lo) bits:
//   hi: xs truncated toward zero (never larger than xs, so lo has xs's sign: a_lo * inf and
//       a_hi * inf agree, as torch's a * inf);
//   lo: the remainder xs - hi (exact in fp32) rounded to the nearest fp16.
// Never 0 for a nonzero x: hi or lo that would be 0 becomes +-2^-24 (fp16's smallest, x's
// sign), so no product with an infinite value of the other operand computes 0 * inf = NaN
// where torch's x * inf is +-inf (2^-24 is 2^-38 below the row's largest: below any fp32 sum
// it joins). x = +-inf: hi = +-inf, lo = +-2^-24; NaN: both NaN; +-0: both +-0.
__device__ __forceinline__ void x3h_split_scaled(float x, float xs, u16& hi, u16& lo) {   // xs: x 2^e
  const u32 ux = __float_as_uint(x);
  const u16 tiny = (u16)(((ux >> 16) & 0x8000u) | 1u);
  asm("cvt.rz.f16.f32 %0, %1;" : "=h"(hi) : "f"(xs));
  float r;
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(xs), "f"(to_acc<f16>(hi)));
  lo = from_acc<f16>(r);
  const bool nonzero = (ux & 0x7fffffffu) != 0u;
  if (nonzero && (hi & 0x7fffu) == 0u) hi = lo = tiny;   // |xs| < 2^-24 (a remainder of it could have the other sign)
  else if (nonzero && ((lo & 0x7fffu) == 0u || (ux & 0x7fffffffu) == 0x7f800000u)) lo = tiny;
}

// Four consecutive values' pieces, value i scaled by its own exponent ei (a row's four share
// one; fp16x3_split_n's are four columns'), packed as they lie in memory: fp16 i in bits
// 16 (i % 2) of word i / 2 of hi and of lo.
struct X3hPieces4 {
  uint2 hi, lo;
};
// Two values' pieces at once, x3h_split_scaled's rules on the pair (value 0 in the low half of
// each word): one conversion a pair each way, the exceptions as masks of the halves. The split
// passes issue an instruction every cycle or two; one value at a time took ~24 of them a value
// for what this does in ~11.
__device__ __forceinline__ void x3h_pieces2(float x0, float x1, float xs0, float xs1, u32& hi, u32& lo) {
  float h0, h1, r0, r1;
  asm("cvt.rz.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(xs1), "f"(xs0));
  asm("{ .reg .f16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; }"
      : "=f"(h0), "=f"(h1) : "r"(hi));
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(r0) : "f"(xs0), "f"(h0));
  asm("sub.rn.f32 %0, %1, %2;" : "=f"(r1) : "f"(xs1), "f"(h1));
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(r1), "f"(r0));
  // 0xffff in each half where: hi is +-0, lo is +-0, |hi| is inf (x is: xs is below 2^15 else)
  u32 hz, lz, inf;
  asm("set.eq.u32.f16x2 %0, %1, %2;" : "=r"(hz) : "r"(hi), "r"(0u));
  asm("set.eq.u32.f16x2 %0, %1, %2;" : "=r"(lz) : "r"(lo), "r"(0u));
  asm("set.eq.u32.f16x2 %0, %1, %2;" : "=r"(inf) : "r"((hi & 0x7fff7fffu) ^ 0x7c007c00u), "r"(0u));
  const u32 u0 = __float_as_uint(x0), u1 = __float_as_uint(x1);
  const u32 nonzero = ((u0 << 1) ? 0x0000ffffu : 0u) | ((u1 << 1) ? 0xffff0000u : 0u);
  const u32 tiny = (__byte_perm(u0, u1, 0x7430) & 0x80008000u) | 0x00010001u;   // +-2^-24, x's signs
  const u32 fix_hi = nonzero & hz, fix_lo = nonzero & (hz | lz | inf);
  hi = (hi & ~fix_hi) | (tiny & fix_hi);
  lo = (lo & ~fix_lo) | (tiny & fix_lo);
}
__device__ __forceinline__ X3hPieces4 x3h_pieces4(float4 v, float4 xs) {   // xs: v's values scaled
  X3hPieces4 p;
  x3h_pieces2(v.x, v.y, xs.x, xs.y, p.hi.x, p.lo.x);
  x3h_pieces2(v.z, v.w, xs.z, xs.w, p.hi.y, p.lo.y);
  return p;
}
__device__ __forceinline__ X3hPieces4 x3h_pieces4(float4 v, int e0, int e1, int e2, int e3) {
  return x3h_pieces4(v, make_float4(x3h_scale_split(v.x, e0), x3h_scale_split(v.y, e1), x3h_scale_split(v.z, e2),
                                    x3h_scale_split(v.w, e3)));
}
// Four values of one row (at k, k % 4 == 0) scaled: FAST (x3h_fast_row) by their factors 2^s and
// fe = 2^e, else by x3h_scale_split to e + s.
template <bool FAST>
__device__ __forceinline__ float4 x3h_scaled4(float4 v, const signed char* __restrict__ tk, i64 k, int kneg, int e,
                                              float fe) {
  if (FAST) {
    const float4 p = x3h_kfactor4(tk, k, kneg ? -(1 << 23) : 1 << 23);
    return make_float4(mul_exact(mul_exact(v.x, p.x), fe), mul_exact(mul_exact(v.y, p.y), fe),
                       mul_exact(mul_exact(v.z, p.z), fe), mul_exact(mul_exact(v.w, p.w), fe));
  }
  const int4 s = x3h_kshift4(tk, k, kneg);
  return make_float4(x3h_scale_split(v.x, e + s.x), x3h_scale_split(v.y, e + s.y), x3h_scale_split(v.z, e + s.z),
                     x3h_scale_split(v.w, e + s.w));
}
template <bool FAST>
__device__ __forceinline__ float x3h_scaled1(float x, const signed char* __restrict__ tk, i64 k, int kneg, int e,
                                             float fe) {
  if (FAST) return mul_exact(mul_exact(x, x3h_kfactor(tk, k, kneg ? -(1 << 23) : 1 << 23)), fe);
  return x3h_scale_split(x, e + x3h_kshift(tk, k, kneg));
}
// Four values of one row at k stored as two 8-byte words (hr, lr: 8-byte aligned).
template <bool FAST>
__device__ __forceinline__ void x3h_split4(float4 v, const signed char* __restrict__ tk, i64 k, int kneg, int e,
                                           float fe, u16* hr, u16* lr) {
  const X3hPieces4 p = x3h_pieces4(v, x3h_scaled4<FAST>(v, tk, k, kneg, e, fe));
  *reinterpret_cast<uint2*>(hr) = p.hi;
  *reinterpret_cast<uint2*>(lr) = p.lo;
}

// The largest key of a block's row (each thread's `top`, T threads).
template <int T>
__device__ __forceinline__ int x3h_block_max(int top, int* warp_max) {
  top = __reduce_max_sync(0xffffffffu, top);
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = top;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < T / 32; ++w) top = max(top, warp_max[w]);
  return top;
}

// A row's largest |x 2^s| over the block (`top`: each thread's over its float4, the scalar tail
// joined here); where the row is fast (x3h_fast_row, block-uniform), its exponent into e and ex.
template <int T>
__device__ __forceinline__ bool x3h_fast_exponent(int top, const float* __restrict__ xs, int K,
                                                  const signed char* __restrict__ tk, int kone, int* warp_max,
                                                  int* __restrict__ ex, int& e) {
  const int tid = threadIdx.x, kt = K / 4 * 4 + tid;
  if (tid < K % 4) top = max(top, x3h_mag(mul_exact(xs[kt], x3h_kfactor(tk, kt, kone))));
  top = x3h_block_max<T>(top, warp_max);
  if (!x3h_fast_row(top)) return false;
  e = 141 - (top >> 23);   // 14 - floor(log2) of the largest
  if (tid == 0) *ex = e;
  return true;
}

// The split of one row by a block of T threads (fp16x3_split): its float4 k < H T held in v
// (k = r T + tid), the rest read from xr.
template <bool FAST, int H, int T>
__device__ __forceinline__ void x3h_split_row(const float4 (&v)[X3H_SPLIT_VECS], const float4* __restrict__ xr, int K,
                                              int e, const signed char* __restrict__ tk, int kneg, u16* hr, u16* lr) {
  const int tid = threadIdx.x, K4 = K / 4;
  const float fe = FAST ? x3h_pow2(e) : 0.f;
#pragma unroll
  for (int r = 0; r < H; ++r) {
    const int k = r * T + tid;
    if (k < K4) x3h_split4<FAST>(v[r], tk, 4 * k, kneg, e, fe, hr + 4 * k, lr + 4 * k);
  }
  // the part past the registers: 4 loads in flight a thread (one, rolled: the latency of each;
  // H200, the level2/63 layer's two splits 188.5 -> 178.3 us)
#pragma unroll 4
  for (int k = H * T + tid; k < K4; k += T) x3h_split4<FAST>(xr[k], tk, 4 * k, kneg, e, fe, hr + 4 * k, lr + 4 * k);
  const int kt = 4 * K4 + tid;   // the scalar tail's value
  if (tid < K - 4 * K4) {
    const float x = reinterpret_cast<const float*>(xr)[kt];
    x3h_split_scaled(x, x3h_scaled1<FAST>(x, tk, kt, kneg, e, fe), hr[kt], lr[kt]);
  }
}

// The rare row (x3h_fast_row) by its keys and x3h_scale_split, read from memory again (L2), by
// a block of T threads: a call of its own, so that its registers do not add to the common row's.
template <int T>
__device__ __noinline__ void x3h_split_row_exact(const float4* __restrict__ xr, int K,
                                                 const signed char* __restrict__ tk, int kneg, int* warp_max,
                                                 int* __restrict__ ex, u16* hr, u16* lr) {
  const int tid = threadIdx.x, K4 = K / 4, kt = 4 * K4 + tid;
  const float* xs = reinterpret_cast<const float*>(xr);
  int top = 0;
  for (int k = tid; k < K4; k += T) top = max(top, x3h_key4(xr[k], x3h_kshift4(tk, 4 * k, kneg)));
  if (tid < K - 4 * K4) top = max(top, x3h_key(xs[kt], x3h_kshift(tk, kt, kneg)));
  const int e = x3h_exponent(x3h_block_max<T>(top, warp_max));
  if (tid == 0) *ex = e;
  const float4 none[X3H_SPLIT_VECS] = {};
  x3h_split_row<false, 0, T>(none, xr, K, e, tk, kneg, hr, lr);
}

// One block per row of x (rows x K fp32, K contiguous, rows ld apart, 16-byte aligned, ld a
// multiple of 4: the host's tensor-core operand form), value k shifted by 2^(+-t[k])
// (x3h_kshift; tk 4-byte aligned, |t| <= X3H_T_MAX, or null): the row's scale exponent into
// ex[row], its hi and lo into rows `row` of hi and lo (fp16, ldo apart, 16-byte aligned). The
// first X3H_SPLIT_THREADS * X3H_SPLIT_VECS * 4 values of the row stay in registers between the
// block's max and the split, so a row that fits is read from memory once, at a copy's speed
// (a warp per row reading it twice took 1.6x as long at 8192x8192: the second read missed L2;
// gemm_plan's X3H_SPLIT_* measurements); the rest of a longer row is read twice. The max is
// taken over the shifted values' bits (x3h_mag: two operations a value fewer than the keys,
// and two multiplies in place of the exponent arithmetic in the split); a row outside
// x3h_fast_row's range takes the keys after it, in a call of its own (inlined, its registers cut
// the blocks an SM: at 512 threads 57 against 40, two blocks against three). Seven blocks an SM
// asked of ptxas: 72 registers, no spills (left to itself, 78: six).
__global__ void __launch_bounds__(X3H_SPLIT_THREADS, 7)
    fp16x3_split(const float* __restrict__ x, i64 ld, int rows, int K, u16* __restrict__ hi, u16* __restrict__ lo,
                 i64 ldo, int* __restrict__ ex, const signed char* __restrict__ tk, int kneg) {
  constexpr int T = X3H_SPLIT_THREADS, V = X3H_SPLIT_VECS;
  __shared__ int warp_max[T / 32];
  const int tid = threadIdx.x;
  const i64 row = blockIdx.x;
  if (row >= rows) return;   // whole block: the barriers below are reached by all or none
  const float4* xr = reinterpret_cast<const float4*>(x + row * ld);
  const float* xs = x + row * ld;
  const int K4 = K / 4, kone = kneg ? -(1 << 23) : 1 << 23;
  float4 v[V];
  int top = 0;
#pragma unroll
  for (int r = 0; r < V; ++r) {
    if (r * T + tid < K4) {
      v[r] = xr[r * T + tid];
      top = max(top, x3h_mag4(v[r], x3h_kfactor4(tk, 4 * (r * T + tid), kone)));
    }
  }
#pragma unroll 4   // (as x3h_split_row's loop over the same values)
  for (int k = V * T + tid; k < K4; k += T) top = max(top, x3h_mag4(xr[k], x3h_kfactor4(tk, 4 * k, kone)));
  u16* hr = hi + row * ldo;
  u16* lr = lo + row * ldo;
  int e;
  if (x3h_fast_exponent<T>(top, xs, K, tk, kone, warp_max, ex + row, e)) {
    x3h_split_row<true, V, T>(v, xr, K, e, tk, kneg, hr, lr);
    return;
  }
  __syncthreads();   // warp_max is read above
  x3h_split_row_exact<T>(xr, K, tk, kneg, warp_max, ex + row, hr, lr);
}

// One bulk copy (the TMA without a tensor map) of `bytes` (a multiple of 16; both addresses
// 16-byte aligned) from global memory to shared memory at `dst`, completing `bar`'s
// transaction count.
__device__ __forceinline__ void bulk_load(u32 dst, const void* src, u32 bytes, u32 bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(dst), "l"(reinterpret_cast<u64>(src)), "r"(bytes), "r"(bar) : "memory");
}

// fp16x3_split's rows (same arguments, same results bit for bit) by a persistent grid of
// blocks of T threads: block b takes rows b, b + G, ... (G = gridDim.x), each brought whole (its
// K / 4 float4; a scalar tail read from memory) into a ring of S shared-memory buffers (dynamic:
// S K / 4 x 16 bytes) by one bulk copy issued S - 1 rows ahead, so that a row's loads run under
// the split of the rows before it (S = 1: under the other blocks' splits). fp16x3_split's block
// of one row (its loads, a barrier for the max, its stores) kept 28-59 % of DRAM bandwidth busy
// (Nsight Compute, H200).
template <int T, int S>
__global__ void __launch_bounds__(T)
    fp16x3_split_ring(const float* __restrict__ x, i64 ld, int rows, int K, u16* __restrict__ hi,
                      u16* __restrict__ lo, i64 ldo, int* __restrict__ ex, const signed char* __restrict__ tk,
                      int kneg) {
  static_assert(T % 32 == 0 && T <= 1024 && S >= 1, "fp16x3_split_ring: whole warps, one ring row at least");
  extern __shared__ __align__(16) unsigned char ring_rows[];
  __shared__ __align__(8) u64 full[S];
  __shared__ int warp_max[T / 32];
  const int tid = threadIdx.x, K4 = K / 4, kt = 4 * K4 + tid, kone = kneg ? -(1 << 23) : 1 << 23;
  const u32 bytes = (u32)K4 * 16, ring = smem_addr(ring_rows), bars = smem_addr(full);
  auto fetch = [&](i64 row, int s) {   // (thread 0)
    mbar_expect_tx(bars + 8 * s, bytes);
    bulk_load(ring + s * bytes, x + row * ld, bytes, bars + 8 * s);
  };
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) mbar_init(bars + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int s = 0; s < S; ++s) {
      const i64 row = blockIdx.x + (i64)s * gridDim.x;
      if (row < rows && bytes) fetch(row, s);
    }
  }
  __syncthreads();
  int s = 0;
  u32 phase = 0;
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    if (bytes) mbar_wait(bars + 8 * s, phase);
    const float4* xv = reinterpret_cast<const float4*>(ring_rows + s * bytes);
    const float* xs = x + row * ld;
    int top = 0;
#pragma unroll 4
    for (int k = tid; k < K4; k += T) top = max(top, x3h_mag4(xv[k], x3h_kfactor4(tk, 4 * k, kone)));
    u16* hr = hi + row * ldo;
    u16* lr = lo + row * ldo;
    int e;
    if (x3h_fast_exponent<T>(top, xs, K, tk, kone, warp_max, ex + row, e)) {
      const float fe = x3h_pow2(e);
#pragma unroll 4
      for (int k = tid; k < K4; k += T) x3h_split4<true>(xv[k], tk, 4 * k, kneg, e, fe, hr + 4 * k, lr + 4 * k);
      if (tid < K - 4 * K4) x3h_split_scaled(xs[kt], x3h_scaled1<true>(xs[kt], tk, kt, kneg, e, fe), hr[kt], lr[kt]);
    } else {
      __syncthreads();   // warp_max is read above
      x3h_split_row_exact<T>(reinterpret_cast<const float4*>(xs), K, tk, kneg, warp_max, ex + row, hr, lr);
    }
    __syncthreads();   // buffer s (and warp_max) read by every thread: refilled S rows on
    if (tid == 0 && bytes && row + (i64)S * gridDim.x < rows) fetch(row + (i64)S * gridDim.x, s);
    if (++s == S) s = 0, phase ^= 1;
  }
}

// t (x3h_t) of each row's largest finite magnitude into tk[row]: from a row-major B (K x N, rows
// ld apart, 16-byte aligned, ld a multiple of 4), a warp a row (blocks of X3H_NSPLIT_THREADS):
// a block a row, as fp16x3_split, ran at 55 % of a copy's bandwidth on 4096-wide rows.
__global__ void __launch_bounds__(X3H_NSPLIT_THREADS)
    fp16x3_rowmax(const float* __restrict__ x, i64 ld, int rows, int cols, signed char* __restrict__ tk) {
  const i64 row = (i64)blockIdx.x * (X3H_NSPLIT_THREADS / 32) + (threadIdx.x >> 5);
  if (row >= rows) return;   // whole warps
  const int lane = threadIdx.x & 31, c4 = cols / 4;
  const float4* xr = reinterpret_cast<const float4*>(x + row * ld);
  const int4 none = make_int4(0, 0, 0, 0);
  int top = 0;
#pragma unroll 8
  for (int c = lane; c < c4; c += 32) top = max(top, x3h_key4(xr[c], none));
  if (lane < cols - 4 * c4) top = max(top, x3h_key(x[row * ld + 4 * c4 + lane], 0));
  top = __reduce_max_sync(0xffffffffu, top);
  if (lane == 0) tk[row] = x3h_t(top);
}

// The pieces of a row-major B (K x N fp32, rows ld apart, 16-byte aligned, ld a multiple of
// 4: matmul's b), N-major as B itself, each column scaled by its own power of two and row k
// shifted by 2^(+-t[k]) (x3h_kshift): the transpose pass a K-major split would need is not
// made. Two passes, blocks of X3H_NSPLIT_THREADS threads, 4 columns a thread (16-byte loads),
// over chunks of rows (grid (cdiv(N, 4 X3H_NSPLIT_THREADS), <= 65535 chunks, the y dimension
// striding over the rest)): fp16x3_colmax_n each column's largest key over X3H_COLMAX_ROWS
// rows into key (zeroed first) by atomicMax (also t from A's columns or a K-major B's rows,
// columns of B^T, with no tk, into tout, key left zero again); fp16x3_split_n the pieces of
// X3H_NSPLIT_ROWS rows (K x ldn fp16, ldn a multiple of 8) and ex[n].
// A column's largest key: atomicMax into *key only where m is larger than what it holds (read
// from L2; a stale value only costs the atomic): keys are exponents, so most chunks of rows
// tie with the column's largest. fp16x3_rowcolmax at 4096^2 38.6 -> 29.5 us (H200).
__device__ __forceinline__ void x3h_key_max(int* key, int m) {
  if (m > __ldcg(key)) atomicMax(key, m);
}
// The last block's move of the N keys accumulated in `key` (left zero): out(i, key[i]).
// NOTES: X3H_DRAIN_LOADS loads a thread issued before their stores, so that the block waits
// one L2 round trip a batch rather than one a key (H200, t of the level2/63 layer's x
// 32.5 -> 29.3 us; fp16x3_rowcolmax at 4096^2 32.2 -> 31.1).
#define X3H_DRAIN_LOADS 8
template <class Out>
__device__ __forceinline__ void x3h_drain_keys(int* __restrict__ key, int N, Out out) {
  const int tid = threadIdx.x, T = blockDim.x;
  for (int i0 = tid; i0 < N; i0 += X3H_DRAIN_LOADS * T) {
    int v[X3H_DRAIN_LOADS];
#pragma unroll
    for (int u = 0; u < X3H_DRAIN_LOADS; ++u) v[u] = i0 + u * T < N ? __ldcg(key + i0 + u * T) : 0;
#pragma unroll
    for (int u = 0; u < X3H_DRAIN_LOADS; ++u)
      if (i0 + u * T < N) {
        out(i0 + u * T, v[u]);
        key[i0 + u * T] = 0;
      }
  }
}
__device__ __forceinline__ float4 x3h_load4(const float* __restrict__ p, int left) {   // left: values in the row
  if (left >= 4) return *reinterpret_cast<const float4*>(p);
  return make_float4(p[0], left > 1 ? p[1] : 0.f, left > 2 ? p[2] : 0.f, 0.f);
}
__global__ void __launch_bounds__(X3H_NSPLIT_THREADS)
    fp16x3_colmax_n(const float* __restrict__ x, i64 ld, int K, int N, const signed char* __restrict__ tk, int kneg,
                    int* __restrict__ key, signed char* __restrict__ tout, u32* __restrict__ done) {
  const int n = 4 * (blockIdx.x * X3H_NSPLIT_THREADS + threadIdx.x);
  if (n < N) {
    int m0 = 0, m1 = 0, m2 = 0, m3 = 0;
    for (int k0 = blockIdx.y * X3H_COLMAX_ROWS; k0 < K; k0 += gridDim.y * X3H_COLMAX_ROWS) {
      const int k1 = min(k0 + X3H_COLMAX_ROWS, K);
#pragma unroll 8
      for (int k = k0; k < k1; ++k) {
        const float4 v = x3h_load4(x + (i64)k * ld + n, N - n);
        const int s = x3h_kshift(tk, k, kneg);
        m0 = max(m0, x3h_key(v.x, s));
        m1 = max(m1, x3h_key(v.y, s));
        m2 = max(m2, x3h_key(v.z, s));
        m3 = max(m3, x3h_key(v.w, s));
      }
    }
    x3h_key_max(key + n, m0);
    if (n + 1 < N) x3h_key_max(key + n + 1, m1);
    if (n + 2 < N) x3h_key_max(key + n + 2, m2);
    if (n + 3 < N) x3h_key_max(key + n + 3, m3);
  }
  if (tout == nullptr) return;
  // t's bytes (tout): the last block to finish turns the keys into them (key and `done` zero
  // first; a fence orders each block's atomics before its count)
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x * gridDim.y - 1;
  __syncthreads();
  if (last) {   // (and key and done zero again: a caller may keep them zero at rest)
    x3h_drain_keys(key, N, [tout](int i, int k) { tout[i] = x3h_t(k); });
    if (threadIdx.x == 0) *done = 0u;
  }
}

// t of a row-major B's rows (into tk) and its columns' keys over the rows shifted by 2^-t[k]
// (into keys; atomicMax'd into key, its count in done, both zero first and left zero: the last
// block to finish moves the keys) in one read of B: fp16x3_rowmax then fp16x3_colmax_n read
// it twice, at 51-71 % of DRAM bandwidth. A block holds whole rows: thread i columns 4 (i + j T),
// j < J (T = blockDim.x <= X3H_ROWCOL_THREADS, 4 J T >= N), X3H_ROWCOL_VECS / (2 J) rows a step in
// registers, the next step's loading under it; each row's largest magnitude over the block (a
// barrier a step, the warps' maxima double buffered) gives t, then its values times 2^-t join the columns' largest magnitudes over
// the block's `rows` rows.
// NOTES: magnitudes, not keys, in the loop (x3h_absmax, then a multiply and a max a value: ~3
// instructions a value where the keys took ~12). The key of a largest magnitude is the largest
// key, and v 2^-t is exact wherever it is a normal float (|v 2^-t| < 4: never overflows). A row
// holding an inf (max.f32 takes it, the keys do not) takes its largest finite one again. A column
// whose largest is in (0, 2^-126] (products rounded up, x3h_mul_up: a binade high, or to 2^-126
// itself) or inf (an inf in it) takes its keys again from the block's rows (L2), exactly as the
// definition; one of zeros does not. From J = X3H_ROWCOL_SOLO_J, one block an SM: capped at
// X3H_ROWCOL_BLOCKS blocks' 64 registers, NVRTC 12.1 spilled it.
template <int J>
__global__ void __launch_bounds__(X3H_ROWCOL_THREADS, J >= X3H_ROWCOL_SOLO_J ? 1 : X3H_ROWCOL_BLOCKS)
    fp16x3_rowcolmax(const float* __restrict__ x, i64 ld, int K, int N, int rows, signed char* __restrict__ tk,
                     int* __restrict__ key, u32* __restrict__ done, int* __restrict__ keys) {
  constexpr int R = X3H_ROWCOL_VECS / (2 * J), W = X3H_ROWCOL_THREADS / 32;
  static_assert(R >= 1 && 2 * R * J == X3H_ROWCOL_VECS, "fp16x3_rowcolmax: 2 J divides X3H_ROWCOL_VECS");
  __shared__ int warp_max[2][R][W], inf_max[W];
  const int tid = threadIdx.x, T = blockDim.x, lane = tid & 31, warp = tid >> 5;
  const i64 k0 = (i64)blockIdx.x * rows, k1 = min((i64)K, k0 + rows);
  const auto block_max = [&](int m, int* buf) {   // (block-uniform: every thread, a barrier after)
    m = __reduce_max_sync(0xffffffffu, m);
    if (lane == 0) buf[warp] = m;
    __syncthreads();
    return __reduce_max_sync(0xffffffffu, lane < T / 32 ? buf[lane] : 0);
  };
  const bool whole = 4 * (tid + (J - 1) * T) + 4 <= N;   // this thread's 4 J columns all in the row
  const auto fetch = [&](float4(&v)[R][J], i64 k) {   // rows k .. k + R - 1 (zeros past k1 or N)
    if (whole && k + R <= k1) {   // (the common step: no tests a load)
      const float* p = x + k * ld + 4 * tid;
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < J; ++j) v[r][j] = *reinterpret_cast<const float4*>(p + r * ld + 4 * j * T);
    } else {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int j = 0; j < J; ++j) {
          const int n = 4 * (tid + j * T);
          v[r][j] = k + r < k1 && n < N ? x3h_load4(x + (k + r) * ld + n, N - n) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
  };
  float cm[J][4] = {};
  float4 ahead[R][J];   // the next step's rows, loading under this step's barrier and arithmetic
  if (k0 < k1) fetch(ahead, k0);
  for (i64 k = k0, step = 0; k < k1; k += R, ++step) {   // block-uniform trip count
    float4 v[R][J];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < J; ++j) v[r][j] = ahead[r][j];
    if (k + R < k1) fetch(ahead, k + R);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float m = 0.f;   // (never NaN: max.f32 takes the other operand of a NaN)
#pragma unroll
      for (int j = 0; j < J; ++j)
        m = x3h_absmax(m, x3h_absmax(x3h_absmax(v[r][j].x, v[r][j].y), x3h_absmax(v[r][j].z, v[r][j].w)));
      const int mw = __reduce_max_sync(0xffffffffu, __float_as_int(m));   // (magnitudes order as ints)
      if (lane == 0) warp_max[step & 1][r][warp] = mw;
    }
    __syncthreads();   // one a step: a buffer is written again two steps on, after the next barrier
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int top = __reduce_max_sync(0xffffffffu, lane < T / 32 ? warp_max[step & 1][r][lane] : 0);
      int row_key;
      if (top == 0x7f800000) {   // an inf in the row (block-uniform): its largest finite magnitude
        const auto fin = [](float a) { return (__float_as_uint(a) & 0x7fffffffu) < 0x7f800000u ? a : 0.f; };   // (NaN: 0)
        float m = 0.f;
#pragma unroll
        for (int j = 0; j < J; ++j)
          m = x3h_absmax(m, x3h_absmax(x3h_absmax(fin(v[r][j].x), fin(v[r][j].y)),
                                       x3h_absmax(fin(v[r][j].z), fin(v[r][j].w))));
        row_key = x3h_key(__int_as_float(block_max(__float_as_int(m), inf_max)), 0);
        __syncthreads();   // inf_max read: free for the next such row
      } else {
        row_key = x3h_key(__int_as_float(top), 0);
      }
      const int t = x3h_t(row_key);
      if (tid == 0 && k + r < k1) tk[k + r] = (signed char)t;
      const float f = x3h_pow2(-t);
#pragma unroll
      for (int j = 0; j < J; ++j) {
        cm[j][0] = x3h_absmax(cm[j][0], x3h_mul_up(v[r][j].x, f));
        cm[j][1] = x3h_absmax(cm[j][1], x3h_mul_up(v[r][j].y, f));
        cm[j][2] = x3h_absmax(cm[j][2], x3h_mul_up(v[r][j].z, f));
        cm[j][3] = x3h_absmax(cm[j][3], x3h_mul_up(v[r][j].w, f));
      }
    }
  }
  __syncthreads();   // tk's bytes of the block's rows (thread 0's stores) visible to the block
  // a column of this thread's whose largest is in (0, 2^-126] (a product below it may have
  // rounded up to it) or inf (an inf in it); 0 is a column of zeros (and NaN): none
  bool exact = false;
#pragma unroll
  for (int j = 0; j < J; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const u32 b = __float_as_uint(cm[j][i]);
      exact |= 4 * (tid + j * T) + i < N && (b - 1u < 0x00800000u || b == 0x7f800000u);
    }
  int ck[J][4];
  if (exact) {   // the keys of the raw values less t (none stays none)
#pragma unroll
    for (int j = 0; j < J; ++j) ck[j][0] = ck[j][1] = ck[j][2] = ck[j][3] = 0;
    const auto join = [&](float4 u, int j, int t) {
      const int raw[4] = {x3h_key(u.x, 0), x3h_key(u.y, 0), x3h_key(u.z, 0), x3h_key(u.w, 0)};
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (raw[i] != 0) ck[j][i] = max(ck[j][i], raw[i] - t);
    };
    if (whole) {   // (unrolled loads in flight: a thread may take this alone, its warp waiting)
#pragma unroll(J == 4 ? 1 : 8 / J)   // (J = 4: four loads a row already; more spilled)
      for (i64 k = k0; k < k1; ++k)
#pragma unroll
        for (int j = 0; j < J; ++j) join(*reinterpret_cast<const float4*>(x + k * ld + 4 * (tid + j * T)), j, tk[k]);
    } else {
      for (i64 k = k0; k < k1; ++k)
#pragma unroll
        for (int j = 0; j < J; ++j) {
          const int n = 4 * (tid + j * T);
          if (n < N) join(x3h_load4(x + k * ld + n, N - n), j, tk[k]);
        }
    }
  } else {
#pragma unroll
    for (int j = 0; j < J; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) ck[j][i] = x3h_key(cm[j][i], 0);
  }
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int n = 4 * (tid + j * T);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (n + i < N) x3h_key_max(key + n + i, ck[j][i]);
  }
  // NOTES: accumulators zero at rest (key, done: a call's first kernel needs no memset before
  // it); the last block to count (a fence orders each block's atomics before it) moves them
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (last) {
    x3h_drain_keys(key, N, [keys](int i, int k) { keys[i] = k; });
    if (tid == 0) *done = 0u;
  }
}

__global__ void __launch_bounds__(X3H_NSPLIT_THREADS)
    fp16x3_split_n(const float* __restrict__ x, i64 ld, int K, int N, const int* __restrict__ key,
                   u16* __restrict__ hi, u16* __restrict__ lo, i64 ldn, int* __restrict__ ex,
                   const signed char* __restrict__ tk, int kneg) {
  const int n = 4 * (blockIdx.x * X3H_NSPLIT_THREADS + threadIdx.x);
  if (n >= N) return;
  const int left = N - n;
  const int e0 = x3h_exponent(key[n]), e1 = left > 1 ? x3h_exponent(key[n + 1]) : 0;
  const int e2 = left > 2 ? x3h_exponent(key[n + 2]) : 0, e3 = left > 3 ? x3h_exponent(key[n + 3]) : 0;
  if (blockIdx.y == 0) {
    ex[n] = e0;
    if (left > 1) ex[n + 1] = e1;
    if (left > 2) ex[n + 2] = e2;
    if (left > 3) ex[n + 3] = e3;
  }
  for (int k0 = blockIdx.y * X3H_NSPLIT_ROWS; k0 < K; k0 += gridDim.y * X3H_NSPLIT_ROWS) {
    const int k1 = min(k0 + X3H_NSPLIT_ROWS, K);
#pragma unroll 4
    for (int k = k0; k < k1; ++k) {
      const int s = x3h_kshift(tk, k, kneg);
      const X3hPieces4 p = x3h_pieces4(x3h_load4(x + (i64)k * ld + n, left), e0 + s, e1 + s, e2 + s, e3 + s);
      u16* hr = hi + (i64)k * ldn + n;
      u16* lr = lo + (i64)k * ldn + n;
      if (left >= 4) {
        *reinterpret_cast<uint2*>(hr) = p.hi;
        *reinterpret_cast<uint2*>(lr) = p.lo;
      } else {   // the row's last 1-3 columns
        hr[0] = (u16)p.hi.x, lr[0] = (u16)p.lo.x;
        if (left > 1) hr[1] = (u16)(p.hi.x >> 16), lr[1] = (u16)(p.lo.x >> 16);
        if (left > 2) hr[2] = (u16)p.hi.y, lr[2] = (u16)p.lo.y;
      }
    }
  }
}

// C (M x N, ldc) = epi(2^-(ea[m] + eb[n]) (A_lo B_hi + A_hi B_lo + A_hi B_hi)) over the K
// range [k0, k0 + K) of the pieces (maps: A_hi, A_lo (M, K) fp16 K-major, boxes of 64 x 128;
// B_hi, B_lo (N, K) K-major, boxes of 64 x BN, or B_NMAJOR (K, N), boxes of 64 columns x 64
// rows of K). Persistent: CTA x computes the 128 x BN tiles x, x + gridDim.x, ... in
// gemm_wgmma.cuh's walk (groups of `group` tile rows); the ring, its mbarrier phases and the
// warpgroups' turns run on across tiles, so the producer loads the next tile's first stages
// while the consumers store the last one (grid: min(tiles, SMs); one CTA a tile below a wave).
template <int BN, class Out, class Epi, bool B_NMAJOR>
__device__ __forceinline__ void gemm_fp16x3_block(const TmaMap* ahi, const TmaMap* alo, const TmaMap* bhi,
                                                  const TmaMap* blo, typename Traits<Out>::Bits* __restrict__ C,
                                                  i64 ldc, int M, int N, int k0, int K, const int* __restrict__ ea,
                                                  const int* __restrict__ eb, const Epi& epi, int group) {
  constexpr int BK = 64, STAGES = X3hRing<BN>::STAGES, STAGE_BYTES = X3hRing<BN>::STAGE_BYTES;
  constexpr int A_BYTES = X3hRing<BN>::A_BYTES, B_BYTES = X3hRing<BN>::B_BYTES;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const u32 ring = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 full = ring + STAGES * STAGE_BYTES, empty = full + 8 * STAGES;
  const int tid = threadIdx.x, wg = tid >> 7;
  const int ktiles = (K + BK - 1) / BK;
  const WgWalk walk{(M + WG_BM - 1) / WG_BM, (N + BN - 1) / BN, group};
  const int units = walk.rows * walk.cols, first = blockIdx.x, step = gridDim.x;
  // k-tiles this CTA issues over all its tiles (the warpgroups' last turn is not passed on)
  const int total = first < units ? (units - first + step - 1) / step * ktiles : 0;

  if (tid == 0) {
    tma_prefetch_map(ahi);
    tma_prefetch_map(alo);
    tma_prefetch_map(bhi);
    tma_prefetch_map(blo);
    mbar_pairs_init<STAGES>(full, 1, empty, 8);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(WG_PRODUCER_REGS));
    if (tid == 0) {
      int gk = 0;   // k-tiles loaded, over all this CTA's tiles
      for (int u = first; u < units; u += step) {
        int row, col, z;
        walk.unit(u, row, col, z);
        const int m0 = row * WG_BM, n0 = col * BN;
        for (int kt = 0; kt < ktiles; ++kt, ++gk) {
          const int s = gk % STAGES;
          if (gk >= STAGES) mbar_wait(empty + 8 * s, ((gk / STAGES) - 1) & 1);
          const u32 dst = ring + s * STAGE_BYTES, bar = full + 8 * s;
          const int k = k0 + kt * BK;
          mbar_expect_tx(bar, STAGE_BYTES);
          tma_load_2d(dst, ahi, k, m0, bar);
          tma_load_2d(dst + A_BYTES, alo, k, m0, bar);
          if constexpr (B_NMAJOR) {
            // boxes of 64 columns (128 bytes) x 64 rows of K, 8 KB apart (as gemm_wgmma.cuh's)
#pragma unroll
            for (int j = 0; j < BN / 64; ++j) {
              tma_load_2d(dst + 2 * A_BYTES + j * 8192, bhi, n0 + 64 * j, k, bar);
              tma_load_2d(dst + 2 * A_BYTES + B_BYTES + j * 8192, blo, n0 + 64 * j, k, bar);
            }
          } else {
            tma_load_2d(dst + 2 * A_BYTES, bhi, k, n0, bar);
            tma_load_2d(dst + 2 * A_BYTES + B_BYTES, blo, k, n0, bar);
        }
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(WG_CONSUMER_REGS));
  const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
  float acc[BN / 2], part[BN / 2];
  const u32 a_row = (u32)(c * 64 * 128);
  int base = 0;   // this tile's first k-tile among all this CTA's
  for (int u = first; u < units; u += step, base += ktiles) {
    int row, col, z;
    walk.unit(u, row, col, z);
    const int m0 = row * WG_BM, n0 = col * BN;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = part[i] = 0.f;
    acc_fence<BN / 2>(part);
    // One k-tile's 12 wgmmas into part, committed as one group. X3H_ORDERED: the two consumer
    // warpgroups take turns (named barriers 4 and 5, 256 threads: warpgroup 0 issues k-tile kt
    // once warpgroup 1 has issued kt - 1, warpgroup 1 once 0 has issued kt), so the tensor cores
    // run one warpgroup's k-tile while the other waits for its own and promotes it; issuing
    // together, both waited at once and the tensor pipe idled.
    auto issue = [&](int kt) {
      kt += base;   // (the ring and the turns count k-tiles over all this CTA's tiles)
      const u32 st = ring + (kt % STAGES) * STAGE_BYTES;
      mbar_wait(full + 8 * (kt % STAGES), (kt / STAGES) & 1);
#if X3H_ORDERED
      if (c == 1 || kt > 0) asm volatile("bar.sync %0, 256;\n" ::"r"(4 + c) : "memory");
#endif
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        // a k-step is 32 bytes further along each 128-byte row (see gemm_wgmma.cuh)
        const u64 dah = wg_desc(st + a_row + kk * 32, 16, 1024), dal = wg_desc(st + A_BYTES + a_row + kk * 32, 16, 1024);
        // N-major B: a k-step is 16 rows of 128 bytes further, 64-column atoms 8 KB apart
        const u32 b_off = B_NMAJOR ? kk * 16 * 128 : kk * 32, b_lbo = B_NMAJOR ? 8192 : 16;
        const u64 dbh = wg_desc(st + 2 * A_BYTES + b_off, b_lbo, 1024);
        const u64 dbl = wg_desc(st + 2 * A_BYTES + B_BYTES + b_off, b_lbo, 1024);
        wgmma_tile<f16, B_NMAJOR, BN>(part, dal, dbh);   // the small products first
        wgmma_tile<f16, B_NMAJOR, BN>(part, dah, dbl);
        wgmma_tile<f16, B_NMAJOR, BN>(part, dah, dbh);
      }
      wgmma_commit();
#if X3H_ORDERED
      if (c == 0 || kt + 1 < total) asm volatile("bar.arrive %0, 256;\n" ::"r"(5 - c) : "memory");
#endif
    };
    // X3H_PROMOTE_EVERY k-tiles per promotion, back to back: an earlier k-tile's stage is
    // released once its wgmmas are done (wait<1>: all groups but the newest), the partial read
    // after all are (wait<0>), so no group is in flight across the loop's back edge (there
    // ptxas would wait for it every iteration, or serialize the wgmmas).
    for (int kt = 0; kt < ktiles;) {
      const int n = min(X3H_PROMOTE_EVERY, ktiles - kt);
      issue(kt);
      if (n == 2) {
        issue(kt + 1);
        wgmma_wait<1>();
        if (lane == 0) mbar_arrive(empty + 8 * ((base + kt) % STAGES));
      }
      wgmma_wait<0>();
      acc_fence<BN / 2>(part);
      if (lane == 0) mbar_arrive(empty + 8 * ((base + kt + n - 1) % STAGES));
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) {
        acc[i] = add_exact(acc[i], part[i]);
        part[i] = 0.f;
      }
      acc_fence<BN / 2>(part);
      kt += n;
    }
    // undo the scaling: accumulator 4 j + 2 h + e is row 16 warp + g + 8 h, column 8 j + 2 t + e
    const int g = lane >> 2, t = lane & 3;
    int er[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = m0 + c * 64 + warp * 16 + g + 8 * h;
      er[h] = m < M ? ea[m] : 0;
    }
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int n = n0 + 8 * j + 2 * t + e;
        const int en = n < N ? eb[n] : 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) acc[4 * j + 2 * h + e] = x3h_scale(acc[4 * j + 2 * h + e], -(er[h] + en));
      }
    wg_store_tile<Out, BN>(acc, C, ldc, M, N, m0 + c * 64, n0, warp, lane, epi);
  }
}
