// The GEMM kernels for sm_80 and newer (the Hopper ones: gemm_sm90a.cu), one per family, for
// matmul (EPI = EpiNone) and linear_relu_div (EPI = EpiBiasReluScale) alike:
//   C (M, N) = epilogue(A (M, K) @ B (K, N)), C row-major; linear_relu_div's B is weight.T.
// cupy_ops/ops/gemm_plan.py picks the kernel, its template arguments, split-K and grid, and
// passes the geometry it shares with them as -D defines (SG_*, TC_*). Every kernel ends with
// the epilogue's arguments (EpiArgs, gemm_epilogue.cuh; zeros for EpiNone).
#include "gemm_naive.cuh"
#include "gemm_simt.cuh"
#include "gemm_tc.cuh"
#include "gemm_epilogue.cuh"

// The reference: one thread per output, any strides (sam, sak: A's; sbk, sbn: B's).
template <class T, class EPI>
__global__ void gemm_naive(const typename Traits<T>::Bits* a, i64 sam, i64 sak, const typename Traits<T>::Bits* b,
                           i64 sbk, i64 sbn, typename Traits<T>::Bits* c, i64 M, i64 N, i64 K,
                           const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_naive_block<T>(a, sam, sak, b, sbk, sbn, c, N, M, N, K, Epilogue<T, EPI>(epi_bias, epi_scale, epi_args));
}

// The reference over a batch: block z of the grid (plus z0, for batches past gridDim.z's
// 65535) multiplies entry z0 + z, its operands sa / sb elements apart (0: one matrix broadcast
// to every entry), its output M * N apart.
template <class T, class EPI>
__global__ void gemm_naive_batched(const typename Traits<T>::Bits* a, i64 sam, i64 sak, i64 sa,
                                   const typename Traits<T>::Bits* b, i64 sbk, i64 sbn, i64 sb,
                                   typename Traits<T>::Bits* c, i64 M, i64 N, i64 K, i64 z0,
                                   const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  const i64 z = z0 + blockIdx.z;
  gemm_naive_block<T>(a + z * sa, sam, sak, b + z * sb, sbk, sbn, c + z * M * N, N, M, N, K,
                      Epilogue<T, EPI>(epi_bias, epi_scale, epi_args));
}

// Tiled fp32 on the CUDA cores; lda, ldb and the layouts: gemm_simt.cuh. SPLIT: block z of the
// grid multiplies the K range [z kslice, (z + 1) kslice) into the z-th (M, N) fp32 slice of c,
// a workspace summed by gemm_splitk_reduce (EPI is then EpiNone); else kslice is unused.
// BLOCKS (per SM, compute capability 9.0+) and DYN_SMEM (tiles in SG_SMEM_BYTES of dynamic
// shared memory): the host's table by layout, gemm_plan.SIMT_OCCUPANCY.
template <bool A_KMAJOR, bool B_KMAJOR, class EPI, bool SPLIT, int BLOCKS, bool DYN_SMEM>
__global__ void __launch_bounds__(SG_THREADS, SG_MIN_BLOCKS(BLOCKS))
    gemm_simt(const float* a, i64 lda, const float* b, i64 ldb, float* c, int M, int N, int K, int vec, int kslice,
              const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  static_assert(!SPLIT || same_type<EPI, EpiNone>, "split-K partial products take no epilogue (the reduction "
                                                    "applies it)");
  if constexpr (SPLIT) {
    const int k0 = blockIdx.z * kslice;
    a += A_KMAJOR ? (i64)k0 : (i64)k0 * lda;
    b += B_KMAJOR ? (i64)k0 : (i64)k0 * ldb;
    c += (i64)blockIdx.z * M * N;
    K = min(kslice, K - k0);
  }
  gemm_simt_block<A_KMAJOR, B_KMAJOR, SG_BK, DYN_SMEM>(a, lda, b, ldb, c, N, M, N, K, vec,
                                               Epilogue<float, EPI>(epi_bias, epi_scale, epi_args));
}

// gemm_simt over a batch (no split-K): block z of the grid (plus z0) multiplies entry z0 + z,
// its operands sa / sb floats apart (0: broadcast; `vec` holds only where every entry's base is
// 16-byte aligned), its output M * N apart.
template <bool A_KMAJOR, bool B_KMAJOR, class EPI, int BLOCKS, bool DYN_SMEM>
__global__ void __launch_bounds__(SG_THREADS, SG_MIN_BLOCKS(BLOCKS))
    gemm_simt_batched(const float* a, i64 lda, i64 sa, const float* b, i64 ldb, i64 sb, float* c, int M, int N,
                      int K, int vec, i64 z0, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  const i64 z = z0 + blockIdx.z;
  gemm_simt_block<A_KMAJOR, B_KMAJOR, SG_BK, DYN_SMEM>(a + z * sa, lda, b + z * sb, ldb, c + z * M * N, N, M, N, K,
                                               vec, Epilogue<float, EPI>(epi_bias, epi_scale, epi_args));
}

// Tensor cores (mma.sync): a (M, K) row-major (lda), bt = B transposed, (N, K) row-major
// (ldb), rows 16-byte aligned. Dynamic shared memory: TC_SMEM_BYTES.
template <class T, class EPI>
__global__ void __launch_bounds__(TC_THREADS) gemm_tc(const typename Traits<T>::Bits* a, i64 lda,
                                                       const typename Traits<T>::Bits* bt, i64 ldb,
                                                       typename Traits<T>::Bits* c, int M, int N, int K,
                                                       const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_tc_block<T>(a, lda, bt, ldb, c, N, M, N, K, Epilogue<T, EPI>(epi_bias, epi_scale, epi_args));
}

// gemm_tc over a batch: block z of the grid (plus z0) multiplies entry z0 + z, its operands sa /
// sb elements apart (0: broadcast; every entry's rows 16-byte aligned), its output M * N apart.
template <class T, class EPI>
__global__ void __launch_bounds__(TC_THREADS) gemm_tc_batched(const typename Traits<T>::Bits* a, i64 lda, i64 sa,
                                                               const typename Traits<T>::Bits* bt, i64 ldb, i64 sb,
                                                               typename Traits<T>::Bits* c, int M, int N, int K, i64 z0,
                                                               const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  const i64 z = z0 + blockIdx.z;
  gemm_tc_block<T>(a + z * sa, lda, bt + z * sb, ldb, c + z * M * N, N, M, N, K, Epilogue<T, EPI>(epi_bias, epi_scale, epi_args));
}

// c (M, N of T) = epilogue(the sum of the split-K slices of ws), rounded to T (grid-stride).
template <class T, class EPI>
__global__ void gemm_splitk_reduce(const float* ws, typename Traits<T>::Bits* c, int M, int N, int slices,
                                   const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  const Epilogue<T, EPI> epi(epi_bias, epi_scale, epi_args);
  const i64 mn = (i64)M * N;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < mn; i += (i64)gridDim.x * blockDim.x)
    c[i] = from_acc<T>(epi(splitk_sum(ws, i, mn, slices), i / N, i % N));
}
