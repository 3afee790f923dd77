"""A user's kernel as written, on the GPU, side by side with torch: CUDA's own headers
(cooperative_groups' grid sync under a cooperative launch, cub's block reduction, cuda_fp16's
__half2 arithmetic), an sm_90a kernel issuing a wgmma, and a template whose scalar parameter
has the template's type, in the four dtypes."""

import pytest
import torch

import cupy_ops

from conftest import HOPPER

pytestmark = pytest.mark.gpu

GRID_SUM = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// every block sums a strided part of x into partial[block]; after the grid-wide barrier block 0
// adds the partials in order: a deterministic sum of the whole array in one launch
extern "C" __global__ void grid_sum(const long long* x, long long* partial, long long* out, long long n) {
  cg::grid_group grid = cg::this_grid();
  __shared__ long long acc[256];
  long long s = 0;
  for (long long i = grid.thread_rank(); i < n; i += grid.size()) s += x[i];
  acc[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) acc[threadIdx.x] += acc[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = acc[0];
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    long long t = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) t += partial[b];
    *out = t;
  }
}
"""


def test_a_grid_wide_reduction_with_cooperative_groups_grid_sync(cuda):
    k = cupy_ops.Kernel(GRID_SUM, "grid_sum")
    blocks = min(k.occupancy(256).resident_blocks, 64)
    x = torch.randint(-(2**40), 2**40, (1_000_003,), device=cuda, dtype=torch.int64)
    partial = torch.empty(blocks, device=cuda, dtype=torch.int64)
    out = torch.empty(1, device=cuda, dtype=torch.int64)
    k(x, partial, out, x.numel(), grid=blocks, block=256, cooperative=True)
    assert out.item() == x.sum().item()


CUB_SUM = r"""
#include <cub/block/block_reduce.cuh>

template <int THREADS>
__global__ void block_sums(const int* x, long long* out, long long n) {
  using Reduce = cub::BlockReduce<long long, THREADS>;
  __shared__ typename Reduce::TempStorage tmp;
  long long i = blockIdx.x * (long long)THREADS + threadIdx.x;
  long long v = i < n ? x[i] : 0;
  long long s = Reduce(tmp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
"""


def test_cub_block_reduce(cuda):
    k = cupy_ops.Kernel(CUB_SUM, "block_sums<128>")
    x = torch.randint(-(2**30), 2**30, (128 * 37 + 5,), device=cuda, dtype=torch.int32)
    blocks = cupy_ops.cdiv(x.numel(), 128)
    out = torch.empty(blocks, device=cuda, dtype=torch.int64)
    k(x, out, x.numel(), grid=blocks, block=128)
    padded = torch.nn.functional.pad(x.long(), (0, blocks * 128 - x.numel()))
    assert torch.equal(out, padded.view(blocks, 128).sum(1))


HALF2 = r"""
#include <cuda_fp16.h>

// y = x * x + x on pairs: two roundings to half, as torch's two half ops round (__hmul2_rn: a
// plain __hmul2 may be contracted with the add into one fma, rounded once)
extern "C" __global__ void square_plus(const __half2* x, __half2* y, long long pairs) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < pairs) y[i] = __hadd2(__hmul2_rn(x[i], x[i]), x[i]);
}
"""


def test_half2_arithmetic_from_cuda_fp16(cuda):
    k = cupy_ops.Kernel(HALF2, "square_plus")
    # values in [0.5, 2): x * x and x are within 2^3 of each other, so torch's float sum of the
    # two halves is exact and both sides round once per op
    x = (torch.rand(2 * 4099, device=cuda) * 1.5 + 0.5).half()
    y = torch.empty_like(x)
    k(x, y, x.numel() // 2, grid=cupy_ops.cdiv(x.numel() // 2, 256), block=256)
    assert torch.equal(y, x * x + x)


WGMMA = r"""
// One warpgroup multiplies A (64 x 16, f16, from registers) by B (16 x 8, f16, from shared
// memory) into D (64 x 8, f32) with one wgmma. B is all ones, so D[r][n] = sum_k A[r][k].
extern "C" __global__ void __launch_bounds__(128) wgmma_rowsums(const unsigned short* a_rows, float* d) {
  __shared__ __align__(128) unsigned short b[16 * 8 * 4];
  for (int i = threadIdx.x; i < 16 * 8 * 4; i += 128) b[i] = 0x3c00;   // 1.0 in f16
  asm volatile("fence.proxy.async.shared::cta;");
  __syncthreads();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  int r0 = 16 * warp + g, r1 = r0 + 8;
  // A's fragment: registers 0 and 2 hold row r0's values, 1 and 3 row r1's (every k of a row
  // holds that row's one value here)
  unsigned a0 = a_rows[r0] | ((unsigned)a_rows[r0] << 16), a1 = a_rows[r1] | ((unsigned)a_rows[r1] << 16);
  unsigned long long addr = (unsigned long long)__cvta_generic_to_shared(b);
  unsigned long long desc = ((addr & 0x3FFFF) >> 4) | (1ull << 16) | (8ull << 32);   // no swizzle
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 0, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a0), "r"(a1), "l"(desc));
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  d[r0 * 8 + 2 * c] = d0; d[r0 * 8 + 2 * c + 1] = d1;
  d[r1 * 8 + 2 * c] = d2; d[r1 * 8 + 2 * c + 1] = d3;
}
"""


def test_an_sm_90a_kernel_issuing_a_wgmma(cuda):
    if not HOPPER:
        pytest.skip("wgmma needs a Hopper GPU (compute capability 9.0)")
    k = cupy_ops.Kernel(WGMMA, "wgmma_rowsums", arch="sm_90a")
    rows = ((torch.arange(64, device=cuda) - 32) * 0.25).half()
    d = torch.full((64, 8), float("nan"), device=cuda)
    k(rows, d, grid=1, block=128)
    a = rows.float()[:, None].expand(64, 16)
    assert torch.equal(d, a @ torch.ones(16, 8, device=cuda))


SCALE = r"""
template <class T>
__global__ void scale(T a, const T* x, T* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_float<T>(to_float(a) * to_float(x[i]));   // one rounding, as torch's x * a
}
"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_a_template_scalar_takes_the_dtypes_c_type(dtype, cuda):
    k = cupy_ops.Kernel(SCALE, "scale")
    x = torch.randn(10_001, device=cuda, dtype=dtype)
    y = torch.empty_like(x)
    k(0.1, x, y, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)
    # the scalar is converted to the dtype as torch converts it, then multiplied as torch does
    assert torch.equal(y, x * torch.tensor(0.1, dtype=dtype, device=cuda))
    if dtype != torch.float64:  # a value the dtype cannot hold is refused, as other scalars are
        with pytest.raises(ValueError, match=r"argument 'a' of kernel scale \(T \("):
            k(1e300, x, y, x.numel(), grid=1, block=1)
    with pytest.raises(TypeError, match="argument 'a' of kernel scale"):
        k("0.1", x, y, x.numel(), grid=1, block=1)


def test_a_named_instantiation_of_cuda_half_takes_a_python_float(cuda):
    k = cupy_ops.Kernel(
        "#include <cuda_fp16.h>\n" + SCALE.replace("from_float<T>(to_float(a) * to_float(x[i]))", "__hmul(a, x[i])"),
        "scale<__half>",
    )
    assert k.params[0] == ("f16", "a", "__half")
    x = torch.randn(4097, device=cuda, dtype=torch.float16)
    y = torch.empty_like(x)
    k(0.1, x, y, x.numel(), grid=cupy_ops.cdiv(x.numel(), 256), block=256)
    assert torch.equal(y, x * torch.tensor(0.1, dtype=torch.float16, device=cuda))
