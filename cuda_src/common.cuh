// Shared device helpers for every cupy_ops kernel.
//
// Self-contained on purpose: no CUDA header is included, so NVRTC compiles these kernels
// with nothing but libnvrtc (no toolkit, no cuda_fp16.h / cuda_bf16.h on the include path),
// on a GPU machine and offline in CI alike. The compiler layer pastes this file into each
// kernel source before compiling, so CuPy's disk cache (whose key ignores #include'd
// files) always sees its current contents.
//
// Half-precision values are carried as raw bits (struct f16 / struct bf16) and converted
// with exact PTX instructions or integer arithmetic. Arithmetic that must match torch bit
// for bit is written in inline PTX without .ftz, because CuPy compiles with -ftz=true and
// torch's kernels do not flush denormals.
#pragma once

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

struct f16 { u16 bits; };   // IEEE binary16, as torch.float16
struct bf16 { u16 bits; };  // bfloat16, as torch.bfloat16

// Traits per element type: the raw-bit type (what moves through memory), the type that
// arithmetic runs in (fp32 for every 16/32-bit type, fp64 for double), and the masks
// that locate the sign and the NaN range in the raw bits.
template <class T> struct Traits;
template <> struct Traits<float> {
  typedef u32 Bits; typedef float Acc;
  static constexpr u32 SIGN = 0x80000000u, INF = 0x7f800000u;
};
template <> struct Traits<double> {
  typedef u64 Bits; typedef double Acc;
  static constexpr u64 SIGN = 0x8000000000000000ull, INF = 0x7ff0000000000000ull;
};
template <> struct Traits<f16> {
  typedef u16 Bits; typedef float Acc;
  static constexpr u16 SIGN = 0x8000u, INF = 0x7c00u;
};
template <> struct Traits<bf16> {
  typedef u16 Bits; typedef float Acc;
  static constexpr u16 SIGN = 0x8000u, INF = 0x7f80u;
};

// ReLU on raw bits, exactly as torch: NaN stays NaN (payload kept), anything with the
// sign bit set (negatives, -inf, -0.0, negative denormals) becomes +0.0, the rest passes
// through unchanged (positive denormals too, which a float compare under -ftz would lose).
template <class T>
__device__ __forceinline__ typename Traits<T>::Bits relu_bits(typename Traits<T>::Bits b) {
  typedef typename Traits<T>::Bits Bits;
  const Bits mag = b & (Bits)~Traits<T>::SIGN;
  const bool negative = (b & Traits<T>::SIGN) != 0 && mag <= Traits<T>::INF;
  return negative ? (Bits)0 : b;
}

// Raw bits <-> arithmetic type. All conversions are exact or round-to-nearest-even and
// keep denormals, as torch's do.
template <class T> __device__ __forceinline__ typename Traits<T>::Acc to_acc(typename Traits<T>::Bits b);
template <class T> __device__ __forceinline__ typename Traits<T>::Bits from_acc(typename Traits<T>::Acc v);

template <> __device__ __forceinline__ float to_acc<float>(u32 b) { return __uint_as_float(b); }
template <> __device__ __forceinline__ u32 from_acc<float>(float v) { return __float_as_uint(v); }
template <> __device__ __forceinline__ double to_acc<double>(u64 b) { return __longlong_as_double((i64)b); }
template <> __device__ __forceinline__ u64 from_acc<double>(double v) { return (u64)__double_as_longlong(v); }
template <> __device__ __forceinline__ float to_acc<f16>(u16 b) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
  return f;
}
template <> __device__ __forceinline__ u16 from_acc<f16>(float v) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
template <> __device__ __forceinline__ float to_acc<bf16>(u16 b) { return __uint_as_float((u32)b << 16); }
template <> __device__ __forceinline__ u16 from_acc<bf16>(float v) {
#if __CUDA_ARCH__ >= 800
  // One instruction: the 16-bit elementwise kernels need it to stay at copy bandwidth
  // (integer rounding measured 84 %, integer NaN check + cvt 88 % of copy, H200). NaN gives
  // the canonical bf16 NaN, as arithmetic on fp32 NaN already does before it gets here.
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
#else
  const u32 u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x0040u);  // quiet NaN
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                    // round to nearest even
#endif
}

// same_type<A, B>: whether A and B are one type (no <type_traits>: no header is included).
template <class A, class B> constexpr bool same_type = false;
template <class A> constexpr bool same_type<A, A> = true;

// Shared-memory address (the 32-bit offset PTX's .shared instructions take) of a generic pointer.
__device__ __forceinline__ u32 smem_addr(const void* p) {
  u64 a;
  asm("cvta.to.shared.u64 %0, %1;\n" : "=l"(a) : "l"(p));
  return (u32)a;
}

// Multiply / divide without flushing denormals (torch does not flush them).
__device__ __forceinline__ float mul_exact(float a, float b) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ double mul_exact(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_exact(float a, float b) {
  float r;
  asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ double add_exact(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float fma_exact(float a, float b, float c) {
  float r;
  asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
  return r;
}
__device__ __forceinline__ double fma_exact(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ __forceinline__ float div_exact(float a, float b) {
  float r;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ double div_exact(double a, double b) { return __ddiv_rn(a, b); }

// Element-typed helpers, for kernels written on T* (cupy_ops.Kernel user kernels):
//   float v = to_float(x[i]);   y[i] = from_float<T>(v);
// (fp64 stays fp64: to_float(double) returns double.) Same exact conversions as above.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ double to_float(double v) { return v; }
__device__ __forceinline__ float to_float(f16 v) { return to_acc<f16>(v.bits); }
__device__ __forceinline__ float to_float(bf16 v) { return to_acc<bf16>(v.bits); }
template <class T> __device__ __forceinline__ T from_float(typename Traits<T>::Acc v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_float<double>(double v) { return v; }
template <> __device__ __forceinline__ f16 from_float<f16>(float v) { f16 r; r.bits = from_acc<f16>(v); return r; }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float v) { bf16 r; r.bits = from_acc<bf16>(v); return r; }
