// The Hopper GEMM kernels (compiled for sm_90a only; cupy_ops/ops/gemm_plan.py picks them on
// compute capability 9.0), for matmul (EPI = EpiNone) and linear_relu_div (EpiBiasReluScale):
// wgmma + TMA (gemm_wgmma.cuh), and fp32 as 3xTF32 (gemm_tf32x3.cuh) or as three fp16 products
// of scaled pieces (gemm_fp16x3.cuh). a_map covers A (M, K)
// row-major; b_map covers B as (N, K) K-major, or (B_NMAJOR, 16-bit T only) as (K, N)
// row-major. c row-major (M, N), ldc.
// Dynamic shared memory: WG_SMEM_BYTES (X3_SMEM_BYTES for tf32x3); block WG_THREADS.
#include "gemm_wgmma.cuh"
#include "gemm_tf32x3.cuh"
#include "gemm_fp16x3.cuh"
#include "gemm_epilogue.cuh"

// gemm_wgmma.cuh gemm_wgmma_tiles: clusters of CM CTAs (2: sharing the B tile), the grid CM x
// the clusters that run at once (persistent) or x the units (one per cluster). The host gives
// the cluster size at launch (cupy_ops/launch.py, launch(..., cluster=CM)), not
// __cluster_dims__: compiled into the kernel, a cluster of 1 made these kernels up to 19 %
// slower (H100, docs/gemm.md#clusters); the kernel traps if launched otherwise. `group`:
// cluster rows per WgWalk group. tma_store != 0: c_map covers c (16-row x 128-byte boxes,
// 128-byte swizzle; ldc 16-byte aligned) and the epilogue stores through the TMA; 0: c_map
// is not read and the epilogue stores with the threads.
template <class T, bool B_NMAJOR, int BN, int CM, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma(const __grid_constant__ TmaMap a_map, const __grid_constant__ TmaMap b_map,
               const __grid_constant__ TmaMap c_map, int tma_store, typename Traits<T>::Bits* c, i64 ldc,
               int M, int N, int K, int group, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_wgmma_tiles<T, B_NMAJOR, BN, CM, T>(&a_map, &b_map, tma_store ? &c_map : nullptr, c, ldc, 0, M, N, K, K,
                                           group, Epilogue<T, EPI>(epi_bias, epi_scale, epi_args));
}

// A batch of `batch` products (gemm_wgmma_tiles BATCHED): a_map and b_map 3-D, the entry their
// outermost dimension (`bcast` bit 0 / 1: A / B broadcast, one matrix read at entry 0), c's
// entries (M, N) row-major one after the other; single CTAs over the (entry, row, column) tile
// walk, persistent; the threads' stores.
template <class T, bool B_NMAJOR, int BN, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_batched(const __grid_constant__ TmaMap a_map, const __grid_constant__ TmaMap b_map,
                       typename Traits<T>::Bits* c, int M, int N, int K, int group, int batch, int bcast,
                       const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_wgmma_tiles<T, B_NMAJOR, BN, 1, T, Epilogue<T, EPI>, false, false, false, true>(
      &a_map, &b_map, nullptr, c, N, (i64)M * N, M, N, K, K, group, Epilogue<T, EPI>(epi_bias, epi_scale, epi_args), batch, bcast);
}

// The same for TF32 with row-major B entries, as gemm_wgmma_swap computes one (C^T = B^T A^T):
// b_map B's entries (K, N) row-major in boxes of 32 x 32, a_map A's (M, K) as the K-major side,
// both 3-D (bcast bit 0 / 1: B / A broadcast); c_map C's entries (M, N) in boxes of 32 x 32,
// 3-D as well, stored through the TMA as gemm_wgmma_swap stores one.
template <int BN, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_batched_swap(const __grid_constant__ TmaMap b_map, const __grid_constant__ TmaMap a_map,
                            const __grid_constant__ TmaMap c_map, int M, int N, int K, int group, int batch, int bcast,
                            const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_wgmma_tiles<float, false, BN, 1, float, Epilogue<float, EPI>, true, false, false, true>(
      &b_map, &a_map, &c_map, nullptr, N, 0, N, M, K, K, group, Epilogue<float, EPI>(epi_bias, epi_scale, epi_args),
      batch, bcast);
}

// The same for outputs too small to fill the GPU with 128 x 128 tiles: WG_KSPLIT_BM (64) x BN
// tiles, the two consumer warpgroups each over half of every k-tile, summed in shared memory
// (gemm_wgmma_tiles KSPLIT); a_map's boxes are WG_KSPLIT_BM rows. The grid: the tiles.
template <class T, bool B_NMAJOR, int BN, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_ksplit(const __grid_constant__ TmaMap a_map, const __grid_constant__ TmaMap b_map,
                      const __grid_constant__ TmaMap c_map, int tma_store, typename Traits<T>::Bits* c, i64 ldc,
                      int M, int N, int K, int group, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_wgmma_tiles<T, B_NMAJOR, BN, 1, T, Epilogue<T, EPI>, false, true>(
      &a_map, &b_map, tma_store ? &c_map : nullptr, c, ldc, 0, M, N, K, K, group, Epilogue<T, EPI>(epi_bias, epi_scale, epi_args));
}

// The same with one CTA per WG_BM x BN tile of the plain kernel (gemm_wgmma_tiles SINGLE: the
// epilogue staged in the ring, 9 stages at BN = 64 instead of 7), for outputs too small to fill
// the GPU with 128 x 128 tiles and K short enough (gemm_plan.wgmma_singles). The grid: the tiles.
template <class T, bool B_NMAJOR, int BN, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_single(const __grid_constant__ TmaMap a_map, const __grid_constant__ TmaMap b_map,
                      const __grid_constant__ TmaMap c_map, int tma_store, typename Traits<T>::Bits* c, i64 ldc,
                      int M, int N, int K, int group, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_wgmma_tiles<T, B_NMAJOR, BN, 1, T, Epilogue<T, EPI>, false, false, true>(
      &a_map, &b_map, tma_store ? &c_map : nullptr, c, ldc, 0, M, N, K, K, group, Epilogue<T, EPI>(epi_bias, epi_scale, epi_args));
}

// fp32 (TF32) C = epilogue(A @ B) for a row-major B (K, N), computed as C^T = B^T A^T
// (gemm_wgmma.cuh SwapRows): b_map covers B as (K, N) row-major in boxes of 32 x 32, a_map A
// (M, K) as a K-major B side (boxes of BN / CM rows), c_map c (M, N) in boxes of 32 x 32
// (128-byte swizzle; ldc = N, 16-byte aligned). The grid walks C^T's tiles (kernel M = N).
template <int BN, int CM, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_swap(const __grid_constant__ TmaMap b_map, const __grid_constant__ TmaMap a_map,
                    const __grid_constant__ TmaMap c_map, int M, int N, int K, int group, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_wgmma_tiles<float, false, BN, CM, float, Epilogue<float, EPI>, true>(
      &b_map, &a_map, &c_map, nullptr, N, 0, N, M, K, K, group, Epilogue<float, EPI>(epi_bias, epi_scale, epi_args));
}

// Split-K partial products: the units of K slice z (the range [z kslice, (z + 1) kslice))
// go into the z-th (M, N) fp32 slice of ws (summed by gemm_splitk_reduce of gemm.cu, with the
// epilogue).
template <class T, bool B_NMAJOR, int BN, int CM>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_partial(const __grid_constant__ TmaMap a_map, const __grid_constant__ TmaMap b_map, float* ws,
                       int M, int N, int K, int kslice, int group) {
  gemm_wgmma_tiles<T, B_NMAJOR, BN, CM, float>(&a_map, &b_map, nullptr, reinterpret_cast<u32*>(ws), N, (i64)M * N,
                                               M, N, K, kslice, group, Epilogue<float, EpiNone>(nullptr, 1.0, EpiArgs{}));
}

// fp32 C = epilogue(A @ B) in three TF32 products (gemm_tf32x3.cuh); maps as for gemm_wgmma<float>
// (both K-major). Dynamic shared memory: X3_SMEM_BYTES.
template <int BN, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_tf32x3(const __grid_constant__ TmaMap a_map,
                                                             const __grid_constant__ TmaMap b_map, u32* c, i64 ldc,
                                                             int M, int N, int K, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_tf32x3_block<BN, float>(&a_map, nullptr, &b_map, c, ldc, M, N, 0, K, Epilogue<float, EPI>(epi_bias, epi_scale, epi_args));
}

// Its split-K partial products, as gemm_wgmma_partial.
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_tf32x3_partial(const __grid_constant__ TmaMap a_map,
                                                                     const __grid_constant__ TmaMap b_map, float* ws,
                                                                     int M, int N, int K, int kslice) {
  const int k0 = blockIdx.z * kslice;
  gemm_tf32x3_block<BN, float>(&a_map, nullptr, &b_map, reinterpret_cast<u32*>(ws) + (i64)blockIdx.z * M * N, N, M, N, k0,
                               min(kslice, K - k0), Epilogue<float, EpiNone>(nullptr, 1.0, EpiArgs{}));
}

// The same with A split by a pass first (tf32x3_split_a; gemm_tf32x3_block PRE): ahi_map and
// alo_map cover its hi and lo (M, K) as a_map covers A; b_map as gemm_tf32x3's.
template <int BN, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_tf32x3_pre(const __grid_constant__ TmaMap ahi_map,
                                                                 const __grid_constant__ TmaMap alo_map,
                                                                 const __grid_constant__ TmaMap b_map, u32* c, i64 ldc,
                                                                 int M, int N, int K, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_tf32x3_block<BN, float, Epilogue<float, EPI>, false, true>(&ahi_map, &alo_map, &b_map, c, ldc, M, N, 0, K,
                                                                  Epilogue<float, EPI>(epi_bias, epi_scale, epi_args));
}

// Its split-K partial products, as gemm_tf32x3_partial.
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_tf32x3_pre_partial(const __grid_constant__ TmaMap ahi_map,
                                                                         const __grid_constant__ TmaMap alo_map,
                                                                         const __grid_constant__ TmaMap b_map, float* ws,
                                                                         int M, int N, int K, int kslice) {
  const int k0 = blockIdx.z * kslice;
  gemm_tf32x3_block<BN, float, Epilogue<float, EpiNone>, false, true>(
      &ahi_map, &alo_map, &b_map, reinterpret_cast<u32*>(ws) + (i64)blockIdx.z * M * N, N, M, N, k0,
      min(kslice, K - k0), Epilogue<float, EpiNone>(nullptr, 1.0, EpiArgs{}));
}

// The same swapped (gemm_tf32x3_block SWAP): b_map covers B (K, N) row-major in 32 x 32 boxes
// or, KMAJOR, B^T (N, K) K-major in boxes of 128 rows (a Linear's weight.T, read as an unswapped
// A: B's split then stays in the consumers' registers); ahi_map / alo_map A's pieces as the
// K-major B side (boxes of BN rows), coming with the stage; the grid covers C^T
// (docs/gemm.md#tf32x3).
template <int BN, bool KMAJOR, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_tf32x3_swap_pre(const __grid_constant__ TmaMap b_map,
                                                                      const __grid_constant__ TmaMap ahi_map,
                                                                      const __grid_constant__ TmaMap alo_map, u32* c,
                                                                      i64 ldc, int M, int N, int K, const void* epi_bias,
                                                                      double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_tf32x3_block<BN, float, Epilogue<float, EPI>, true, true, KMAJOR>(&b_map, &alo_map, &ahi_map, c, ldc, N, M, 0, K,
                                                                         Epilogue<float, EPI>(epi_bias, epi_scale, epi_args));
}

template <int BN, bool KMAJOR>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_tf32x3_swap_pre_partial(const __grid_constant__ TmaMap b_map, const __grid_constant__ TmaMap ahi_map,
                                 const __grid_constant__ TmaMap alo_map, float* ws, int M, int N, int K, int kslice) {
  const int k0 = blockIdx.z * kslice;
  gemm_tf32x3_block<BN, float, Epilogue<float, EpiNone>, true, true, KMAJOR>(
      &b_map, &alo_map, &ahi_map, reinterpret_cast<u32*>(ws) + (i64)blockIdx.z * M * N, N, N, M, k0,
      min(kslice, K - k0), Epilogue<float, EpiNone>(nullptr, 1.0, EpiArgs{}));
}

// gemm_tf32x3_pre's pass: A's hi and lo (gemm_tf32x3.cuh tf32x3_split_rows).
__global__ void tf32x3_split_a(const u32* a, i64 lda, u32* hi, u32* lo, i64 ldw, int M, int K) {
  tf32x3_split_rows(a, lda, hi, lo, ldw, M, K);
}

// fp32 C = epilogue(A @ B) in three TF32 products for a row-major B (K, N), as C^T = B^T A^T
// (gemm_tf32x3_block SWAP): b_map covers B in 32 x 32 boxes, a_map A (M, K) as the K-major B
// side (boxes of BN rows); c row-major (M, N), ldc. The grid covers C^T: (M / BN, N / 128).
template <int BN, class EPI>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_tf32x3_swap(const __grid_constant__ TmaMap b_map,
                                                                  const __grid_constant__ TmaMap a_map, u32* c,
                                                                  i64 ldc, int M, int N, int K, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args) {
  gemm_tf32x3_block<BN, float, Epilogue<float, EPI>, true>(&b_map, nullptr, &a_map, c, ldc, N, M, 0, K,
                                                           Epilogue<float, EPI>(epi_bias, epi_scale, epi_args));
}

// Its split-K partial products into the (M, N) fp32 slices of ws, as gemm_tf32x3_partial.
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1) gemm_tf32x3_swap_partial(const __grid_constant__ TmaMap b_map,
                                                                          const __grid_constant__ TmaMap a_map,
                                                                          float* ws, int M, int N, int K, int kslice) {
  const int k0 = blockIdx.z * kslice;
  gemm_tf32x3_block<BN, float, Epilogue<float, EpiNone>, true>(
      &b_map, nullptr, &a_map, reinterpret_cast<u32*>(ws) + (i64)blockIdx.z * M * N, N, N, M, k0, min(kslice, K - k0),
      Epilogue<float, EpiNone>(nullptr, 1.0, EpiArgs{}));
}

// fp32 C = epilogue(A @ B) in three fp16 products of scaled pieces (gemm_fp16x3.cuh): the maps
// cover the pieces fp16x3_split made of A (M, K), K-major, and of B: of B^T (N, K), K-major,
// or (B_NMAJOR) fp16x3_split_n's of a row-major B (K, N); ea / eb the rows' / columns' scale
// exponents. Dynamic shared memory: X3_SMEM_BYTES.
template <int BN, class EPI, bool B_NMAJOR>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_fp16x3(const __grid_constant__ TmaMap ahi, const __grid_constant__ TmaMap alo,
                const __grid_constant__ TmaMap bhi, const __grid_constant__ TmaMap blo, u32* c, i64 ldc, int M, int N,
                int K, const int* ea, const int* eb, const void* epi_bias, double epi_scale,
    const __grid_constant__ EpiArgs epi_args, int group) {
  gemm_fp16x3_block<BN, float, Epilogue<float, EPI>, B_NMAJOR>(&ahi, &alo, &bhi, &blo, c, ldc, M, N, 0, K, ea, eb,
                                                               Epilogue<float, EPI>(epi_bias, epi_scale, epi_args), group);
}

// Its split-K partial products (scaled back: the slices add), as gemm_wgmma_partial.
template <int BN, bool B_NMAJOR>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_fp16x3_partial(const __grid_constant__ TmaMap ahi, const __grid_constant__ TmaMap alo,
                        const __grid_constant__ TmaMap bhi, const __grid_constant__ TmaMap blo, float* ws, int M,
                        int N, int K, int kslice, const int* ea, const int* eb, int group) {
  const int k0 = blockIdx.z * kslice;
  gemm_fp16x3_block<BN, float, Epilogue<float, EpiNone>, B_NMAJOR>(
      &ahi, &alo, &bhi, &blo, reinterpret_cast<u32*>(ws) + (i64)blockIdx.z * M * N, N, M, N, k0,
      min(kslice, K - k0), ea, eb, Epilogue<float, EpiNone>(nullptr, 1.0, EpiArgs{}), group);
}
