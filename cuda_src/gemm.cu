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

// c (M, N of T, rows ldc apart) = epilogue(c), in place: a user epilogue applied by a pass after
// the GEMM stored the Linear's output (bias added, rounded to T), launched without a bias (the
// Linear's -0.0 then leaves v as it is): the bits of the epilogue applied at the store. A thread
// takes AFTER_VECS 16-byte vectors of row m = z gridDim.y + y, all loaded before the epilogue
// runs; where the rows are not 16-byte aligned (`vec` 0) or past N, one value at a time.
// NOTES: the Hopper kernels apply the epilogue with 8 warps an SM and the tensor cores idle, and
// ptxas schedules no value's chain past another's branch: an epilogue that divides (IEEE
// division's slow path is a branch) ran one value at a time there, two Mish +61 % on the bf16
// layer (H200). Here at full occupancy. One value a thread took +16 % for any epilogue (a DRAM
// round trip a thread, 31 waves of blocks).
template <class T, class EPI>
__global__ void gemm_epilogue_after(typename Traits<T>::Bits* c, i64 ldc, int M, int N, int vec,
                                    const void* epi_bias, double epi_scale, const __grid_constant__ EpiArgs epi_args) {
  typedef typename Traits<T>::Bits Bits;
  constexpr int PER = 16 / (int)sizeof(Bits), EACH = AFTER_VECS * PER;   // values a vector, a thread
  const Epilogue<T, EPI> epi(epi_bias, epi_scale, epi_args);
  const int m = blockIdx.z * gridDim.y + blockIdx.y;
  const i64 n0 = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * EACH;
  if (m >= M || n0 >= N) return;
  Bits* row = c + (i64)m * ldc;
  if (vec && n0 + EACH <= N) {
    uint4 v[AFTER_VECS];
#pragma unroll
    for (int i = 0; i < AFTER_VECS; ++i) v[i] = reinterpret_cast<const uint4*>(row + n0)[i];
    Bits* b = reinterpret_cast<Bits*>(v);
#pragma unroll
    for (int j = 0; j < EACH; ++j) b[j] = from_acc<T>(epi(to_acc<T>(b[j]), m, n0 + j));
#pragma unroll
    for (int i = 0; i < AFTER_VECS; ++i) reinterpret_cast<uint4*>(row + n0)[i] = v[i];
  } else {
    for (i64 n = n0; n < N && n < n0 + EACH; ++n) row[n] = from_acc<T>(epi(to_acc<T>(row[n]), m, n));
  }
}

// One value through the epilogue and nothing else: never launched, its PTX is what the host
// counts (runtime.serial_ops: the instructions that end a straight line of code).
template <class T, class EPI>
__global__ void gemm_epilogue_probe(typename Traits<T>::Bits* c, int m, int n, const void* epi_bias,
                                    double epi_scale, const __grid_constant__ EpiArgs epi_args) {
  const Epilogue<T, EPI> epi(epi_bias, epi_scale, epi_args);
  *c = from_acc<T>(epi(to_acc<T>(*c), m, n));
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
