// cupy_ops' <math.h> for NVRTC, which has no C library: NVRTC itself declares the functions
// (sinf, expf, fabs, isnan, ...); this adds the constants C and POSIX define (glibc's values).
// libcu++'s <cuda/std/cmath> defines INFINITY and NAN its own way: include it first, or expect
// NVRTC's warning that the macro is redefined.
#pragma once
#ifndef INFINITY
#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define INFINITY __builtin_bit_cast(float, 0x7f800000u)
#define NAN __builtin_bit_cast(float, 0x7fc00000u)
#define HUGE_VAL __builtin_bit_cast(double, 0x7ff0000000000000ull)
#endif
#endif
#endif
#ifndef INFINITY
// an NVRTC without __builtin_bit_cast: device functions (usable in device code, not in constexpr)
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fc00000)
#define HUGE_VAL __longlong_as_double(0x7ff0000000000000ll)
#endif
#ifndef HUGE_VALF
#define HUGE_VALF INFINITY
#endif
#ifndef M_PI
#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440
#endif
