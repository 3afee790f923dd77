// transpose<T>: dst = src.T for a row-major src (rows, cols) with leading dimension lds,
// written row-major (cols, rows) with leading dimension ldd. Used to bring a GEMM operand into
// the K-major form the tensor-core kernels read (matmul's b for TF32, or any column-major
// view): torch's copy of a transposed view ran at about a third of copy bandwidth (H200).
// TR_TILE x TR_TILE (32 x 32) tiles through shared memory (one padding column: conflict-free
// columns for 4-byte types), block TR_TILE x TR_ROWS (32 x 8) threads, both global sides
// coalesced; grid (cdiv(cols, TR_TILE), <= 65535), the y dimension strides over the row tiles.
#include "common.cuh"

// TR_TILE and TR_ROWS come from the host (cupy_ops/ops/gemm_plan.py), which sizes the grid
// and block with them.
#if !defined(TR_TILE) || !defined(TR_ROWS)
#error "transpose.cu: the host passes TR_TILE and TR_ROWS (-D)"
#endif

template <class T>
__global__ void __launch_bounds__(TR_TILE * TR_ROWS) transpose(const typename Traits<T>::Bits* __restrict__ src, i64 lds,
                                                               typename Traits<T>::Bits* __restrict__ dst, i64 ldd,
                                                               int rows, int cols) {
  __shared__ typename Traits<T>::Bits tile[TR_TILE][TR_TILE + 1];
  const int c0 = blockIdx.x * TR_TILE, tx = threadIdx.x, ty = threadIdx.y;
  for (int r0 = blockIdx.y * TR_TILE; r0 < rows; r0 += gridDim.y * TR_TILE) {
#pragma unroll
    for (int i = ty; i < TR_TILE; i += TR_ROWS)
      if (r0 + i < rows && c0 + tx < cols) tile[i][tx] = src[(i64)(r0 + i) * lds + c0 + tx];
    __syncthreads();
#pragma unroll
    for (int i = ty; i < TR_TILE; i += TR_ROWS)
      if (c0 + i < cols && r0 + tx < rows) dst[(i64)(c0 + i) * ldd + r0 + tx] = tile[tx][i];
    __syncthreads();
  }
}
