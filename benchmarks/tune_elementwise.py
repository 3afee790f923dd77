"""Tuning experiment for the elementwise loop (run on the GPU machine; the decision it made:
docs/design.md#elementwise).

Times launch shapes and cache hints of a ReLU kernel against torch.relu and a d2d copy on
the same buffers: grid-stride with a device-sized grid vs one-shot chunked blocks, vectors
per thread, and streaming (.cs) loads/stores. Prints a table, median of CUDA-event timings.
The kernels are built with CuPy's RawModule directly (an experiment outside the package).

    python benchmarks/tune_elementwise.py | tee tune_elementwise.log
"""

import sys

import cupy
import torch

from cupy_ops import compiler
from cupy_ops.bench.env import describe, environment
from cupy_ops.bench.timing import time_cuda

print(describe(environment()))

SRC = (
    compiler.assemble("common.cuh")
    + r"""
struct alignas(16) V16 { u32 w[4]; };
template <bool CS> __device__ __forceinline__ V16 ld(const V16* p) {
  V16 v;
  if (CS) asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p));
  else v = *p;
  return v;
}
template <bool CS> __device__ __forceinline__ void st(V16* p, V16 v) {
  if (CS) asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3]) : "memory");
  else *p = v;
}
template <class T> __device__ __forceinline__ V16 op(V16 v) {
  typedef typename Traits<T>::Bits Bits;
  union { V16 v; Bits e[16 / sizeof(Bits)]; } u; u.v = v;
#pragma unroll
  for (int j = 0; j < 16 / (int)sizeof(Bits); ++j) u.e[j] = relu_bits<T>(u.e[j]);
  return u.v;
}
template <class T, int U, bool CS>
__global__ void grid_stride(const V16* x, V16* y, i64 nvec) {
  const i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x, nt = (i64)gridDim.x * blockDim.x;
  i64 i = tid;
  for (; i + (U - 1) * nt < nvec; i += U * nt) {
    V16 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = ld<CS>(x + i + u * nt);
#pragma unroll
    for (int u = 0; u < U; ++u) st<CS>(y + i + u * nt, op<T>(v[u]));
  }
  for (; i < nvec; i += nt) st<CS>(y + i, op<T>(ld<CS>(x + i)));
}
template <class T, int U, bool CS>
__global__ void chunked(const V16* x, V16* y, i64 nvec) {
  const i64 base = (i64)blockIdx.x * blockDim.x * U + threadIdx.x;
  V16 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) { const i64 i = base + (i64)u * blockDim.x; if (i < nvec) v[u] = ld<CS>(x + i); }
#pragma unroll
  for (int u = 0; u < U; ++u) { const i64 i = base + (i64)u * blockDim.x; if (i < nvec) st<CS>(y + i, op<T>(v[u])); }
}
"""
)

TYPES = {torch.float32: "float", torch.float16: "f16"}
VARIANTS = []
for t in TYPES.values():
    for u in (2, 4, 8):
        for cs in ("false", "true"):
            VARIANTS.append(f"grid_stride<{t}, {u}, {cs}>")
            VARIANTS.append(f"chunked<{t}, {u}, {cs}>")
mod = cupy.RawModule(code=SRC, options=("-std=c++17",), name_expressions=VARIANTS)
sms = torch.cuda.get_device_properties(0).multi_processor_count
# torch and CuPy both use the legacy default stream here, so events and kernels are ordered

rows = []
for shape in [(1024, 8192), (4096, 65536)]:
    for dtype, tname in TYPES.items():
        x = torch.randn(shape, device="cuda", dtype=dtype)
        y = torch.empty_like(x)
        nvec = x.numel() * x.element_size() // 16
        ref = torch.relu(x)
        res = {
            "torch.relu": time_cuda(lambda: torch.relu(x), runs=60).median,
            "copy": time_cuda(lambda: y.copy_(x), runs=60).median,
        }
        for v in VARIANTS:
            if not v.startswith(("grid_stride<" + tname + ",", "chunked<" + tname + ",")):
                continue
            k = mod.get_function(v)
            u = int(v.split(",")[1])
            configs = []
            if v.startswith("grid"):
                for bps in (4, 8, 16):
                    configs.append((f"{v} bps={bps}", min(sms * bps, -(-nvec // 256)), 256))
            else:
                for threads in (128, 256, 512):
                    configs.append((f"{v} t={threads}", -(-nvec // (threads * u)), threads))
            for name, blocks, threads in configs:
                fn = lambda: k((blocks,), (threads,), (x.data_ptr(), y.data_ptr(), nvec))  # noqa
                fn()
                torch.cuda.synchronize()
                if not torch.equal(y, ref):
                    print("WRONG", name, file=sys.stderr)
                res[name] = time_cuda(fn, runs=60).median
        copy = res["copy"]
        best = sorted(res.items(), key=lambda kv: kv[1])
        print(f"\n{shape} {dtype}: copy {copy * 1e3:.1f} us, torch.relu {res['torch.relu'] * 1e3:.1f} us")
        for name, ms in best[:8]:
            print(f"  {name:<40} {ms * 1e3:8.1f} us  {100 * copy / ms:5.1f}% of copy")
        cur = [kv for kv in res.items() if kv[0].startswith(f"grid_stride<{tname}, 4, false> bps=8")]
        print(f"  current design: {cur[0][0]} {cur[0][1] * 1e3:.1f} us {100 * copy / cur[0][1]:.1f}%")
