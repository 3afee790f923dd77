// cupy_ops' stand-in, in a load_inline source compiled by NVRTC, for each include it sets aside
// (torch's headers, the C and C++ libraries', which NVRTC has none of): what device code takes
// from them through torch/extension.h as nvcc compiles it. The fixed-width integer types, the
// constants of <math.h>, <float.h> and <limits.h>, and as std:: names those types, min / max and
// <cmath>'s functions.
// NOTES: the functions are NVRTC's own global ones, brought in by using-declarations as
// libstdc++'s <cmath> brings in the C library's, so `using namespace std;` then `exp(x)` finds
// one function, not two. numeric_limits: load_inline_limits.h (libcu++'s <limits>, ~0.5 s of
// NVRTC's front end), taken only by a source that names it.
#pragma once
extern "C++" {  // (C++ linkage even where the include stood in an extern "C" block)
#include <stdint.h>
#include <math.h>
#if __has_include(<cuda_fp16.h>)
#include <cuda_fp16.h>  // (torch/extension.h gives __half and __nv_bfloat16 through c10's headers)
#include <cuda_bf16.h>
#endif
#if __has_include(<cuda/std/cfloat>)
#include <cuda/std/cfloat>
#include <cuda/std/climits>
#endif
// what a libcu++ without them (CCCL 13.0's <cuda/std/cfloat> under NVRTC) leaves undefined
#ifndef FLT_MAX
#define FLT_MAX 3.40282347e+38F
#define FLT_MIN 1.17549435e-38F
#define FLT_EPSILON 1.19209290e-07F
#define FLT_TRUE_MIN 1.40129846e-45F
#endif
#ifndef DBL_MAX
#define DBL_MAX 1.7976931348623157e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-16
#define DBL_TRUE_MIN 4.9406564584124654e-324
#endif
#ifndef INT_MAX
#define CHAR_BIT 8
#define SCHAR_MAX 127
#define SCHAR_MIN (-128)
#define UCHAR_MAX 255
#define SHRT_MAX 32767
#define SHRT_MIN (-SHRT_MAX - 1)
#define USHRT_MAX 65535
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define UINT_MAX 4294967295U
#define LONG_MAX 9223372036854775807L
#define LONG_MIN (-LONG_MAX - 1L)
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MAX 9223372036854775807LL
#define LLONG_MIN (-LLONG_MAX - 1LL)
#define ULLONG_MAX 18446744073709551615ULL
#endif

namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
using ::intptr_t; using ::uintptr_t; using ::size_t; using ::ptrdiff_t;

template <class T> __host__ __device__ constexpr const T& min(const T& a, const T& b) { return b < a ? b : a; }
template <class T> __host__ __device__ constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }

using ::abs; using ::fabs; using ::fabsf; using ::fmod; using ::fmodf; using ::remainder; using ::remainderf;
using ::fma; using ::fmaf; using ::fmin; using ::fminf; using ::fmax; using ::fmaxf; using ::fdim;
using ::exp; using ::expf; using ::exp2; using ::exp2f; using ::expm1; using ::expm1f;
using ::log; using ::logf; using ::log2; using ::log2f; using ::log10; using ::log10f; using ::log1p; using ::log1pf;
using ::pow; using ::powf; using ::sqrt; using ::sqrtf; using ::cbrt; using ::cbrtf; using ::hypot; using ::hypotf;
using ::sin; using ::sinf; using ::cos; using ::cosf; using ::tan; using ::tanf;
using ::asin; using ::asinf; using ::acos; using ::acosf; using ::atan; using ::atanf; using ::atan2; using ::atan2f;
using ::sinh; using ::sinhf; using ::cosh; using ::coshf; using ::tanh; using ::tanhf;
using ::asinh; using ::asinhf; using ::acosh; using ::acoshf; using ::atanh; using ::atanhf;
using ::erf; using ::erff; using ::erfc; using ::erfcf; using ::tgamma; using ::tgammaf; using ::lgamma; using ::lgammaf;
using ::floor; using ::floorf; using ::ceil; using ::ceilf; using ::trunc; using ::truncf;
using ::round; using ::roundf; using ::rint; using ::rintf; using ::nearbyint; using ::nearbyintf;
using ::lround; using ::llround; using ::lrint; using ::llrint;
using ::copysign; using ::copysignf; using ::frexp; using ::ldexp; using ::modf; using ::scalbn; using ::logb;
using ::ilogb; using ::nextafter; using ::remquo; using ::remquof;
using ::isnan; using ::isinf; using ::isfinite; using ::signbit;

// <cmath>'s overloads for integer and mixed arguments, as libstdc++ promotes them (an integer
// counts as double): NVRTC's own take float or double, so std::sqrt(n) of an int, or
// std::pow(x, 0.5) of a float, were ambiguous. A template loses to an exact non-template one.
template <class T> struct __cupy_ops_real {};
template <> struct __cupy_ops_real<float> { typedef float type; };
template <> struct __cupy_ops_real<double> { typedef double type; };
template <class T> struct __cupy_ops_int {};
#define CUPY_OPS_INT(T)                                                   \
  template <> struct __cupy_ops_int<T> { typedef double type; };          \
  template <> struct __cupy_ops_real<T> { typedef double type; };
CUPY_OPS_INT(bool) CUPY_OPS_INT(char) CUPY_OPS_INT(signed char) CUPY_OPS_INT(unsigned char)
CUPY_OPS_INT(short) CUPY_OPS_INT(unsigned short) CUPY_OPS_INT(int) CUPY_OPS_INT(unsigned)
CUPY_OPS_INT(long) CUPY_OPS_INT(unsigned long) CUPY_OPS_INT(long long) CUPY_OPS_INT(unsigned long long)
#undef CUPY_OPS_INT
template <class A, class B> struct __cupy_ops_mixed {
  typedef decltype(typename __cupy_ops_real<A>::type() + typename __cupy_ops_real<B>::type()) type;
};
#define CUPY_OPS_ONE(f) \
  template <class T> __host__ __device__ typename __cupy_ops_int<T>::type f(T x) { return ::f(double(x)); }
#define CUPY_OPS_TEST(f)                                                                         \
  template <class T> __host__ __device__ decltype(bool(typename __cupy_ops_int<T>::type())) f(T x) { \
    return ::f(double(x));                                                                         \
  }
#define CUPY_OPS_TWO(f)                                                                          \
  template <class A, class B>                                                                    \
  __host__ __device__ typename __cupy_ops_mixed<A, B>::type f(A a, B b) {                        \
    typedef typename __cupy_ops_mixed<A, B>::type R;                                             \
    return ::f(R(a), R(b));                                                                      \
  }
CUPY_OPS_ONE(fabs) CUPY_OPS_ONE(exp) CUPY_OPS_ONE(exp2) CUPY_OPS_ONE(expm1) CUPY_OPS_ONE(log)
CUPY_OPS_ONE(log2) CUPY_OPS_ONE(log10) CUPY_OPS_ONE(log1p) CUPY_OPS_ONE(sqrt) CUPY_OPS_ONE(cbrt)
CUPY_OPS_ONE(sin) CUPY_OPS_ONE(cos) CUPY_OPS_ONE(tan) CUPY_OPS_ONE(asin) CUPY_OPS_ONE(acos)
CUPY_OPS_ONE(atan) CUPY_OPS_ONE(sinh) CUPY_OPS_ONE(cosh) CUPY_OPS_ONE(tanh) CUPY_OPS_ONE(asinh)
CUPY_OPS_ONE(acosh) CUPY_OPS_ONE(atanh) CUPY_OPS_ONE(erf) CUPY_OPS_ONE(erfc) CUPY_OPS_ONE(tgamma)
CUPY_OPS_ONE(lgamma) CUPY_OPS_ONE(floor) CUPY_OPS_ONE(ceil) CUPY_OPS_ONE(trunc) CUPY_OPS_ONE(round)
CUPY_OPS_ONE(rint) CUPY_OPS_ONE(nearbyint) CUPY_OPS_ONE(logb)
CUPY_OPS_TEST(isnan) CUPY_OPS_TEST(isinf) CUPY_OPS_TEST(isfinite) CUPY_OPS_TEST(signbit)
CUPY_OPS_TWO(pow) CUPY_OPS_TWO(fmod) CUPY_OPS_TWO(remainder) CUPY_OPS_TWO(fmin) CUPY_OPS_TWO(fmax)
CUPY_OPS_TWO(fdim) CUPY_OPS_TWO(atan2) CUPY_OPS_TWO(hypot) CUPY_OPS_TWO(copysign) CUPY_OPS_TWO(nextafter)
#undef CUPY_OPS_ONE
#undef CUPY_OPS_TEST
#undef CUPY_OPS_TWO
}  // namespace std
}  // extern "C++"
