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
using ::ilogb; using ::nextafter;
using ::isnan; using ::isinf; using ::isfinite; using ::signbit;
}  // namespace std
}  // extern "C++"
