// load_inline_std.h, and std::numeric_limits (libcu++'s): the stand-in cupy_ops takes for a
// load_inline source that names numeric_limits.
#pragma once
extern "C++" {  // (C++ linkage even where the include stood in an extern "C" block)
#include "load_inline_std.h"
#if __has_include(<cuda/std/limits>)
#include <cuda/std/limits>
namespace std {
using cuda::std::numeric_limits;
}  // namespace std
#endif
}  // extern "C++"
