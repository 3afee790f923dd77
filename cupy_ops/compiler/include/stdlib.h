// cupy_ops' <stdlib.h> for NVRTC, which has no C library (cuda.h includes it). NVRTC itself
// declares what device code may call of it (malloc, free, abs, ...).
#pragma once
#ifndef EXIT_SUCCESS
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#endif
