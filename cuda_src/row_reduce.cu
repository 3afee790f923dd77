// Row reductions over the last dimension of a contiguous (rows, n) tensor, as torch computes
// them: sum, mean, amax, amin and logsumexp into (rows,), softmax into (rows, n).
//
// One block a row (blocks of 32 .. RR_MAX_THREADS threads, whole warps: the host sizes them by
// n), each thread over 16-byte vectors tid, tid + blockDim.x, ... (coalesced; RR_UNROLL loads in
// flight: one 4- or 2-byte load at a time kept too few bytes in flight for DRAM's bandwidth), then
// the warps' shuffles and the block's warps in order: deterministic. Arithmetic in the type torch
// accumulates in (float for 16- and 32-bit types, double for float64), but for sums of fp32 rows
// (RrSumAcc: double, rounded once).
// NOTES:
// - amax / amin compare ordered integer keys of the raw bits, not floats: CuPy compiles with
//   -ftz=true, under which a float compare treats denormals as zero, and torch's result is the
//   element itself, bit for bit. Any NaN gives NaN (torch propagates it).
// - logsumexp is torch's formula: m = amax (0 where it is infinite), log(sum exp(x - m)) + m;
//   softmax torch's too: exp(x - amax) / sum exp(x - amax) (16-bit types: exp2 and a reciprocal,
//   rr_exp_of, RrSoftmax), so rows with NaN or an infinity give what torch gives (NaN for
//   softmax of a row holding +inf or only -inf; +inf / -inf for logsumexp). The row is read
//   again for the sum (and for softmax's store), from L2: a row held in registers (32 values a
//   thread) was slower for all but fp32 softmax (docs/epilogues.md#row-reductions).
// - Sums add with add.rn (no flushing); exp and log are CUDA's under -ftz (an fp32 term below
//   2^-126 counts as 0: a softmax output there is 0 where torch may give a denormal).
#include "common.cuh"

#if !defined(RR_MAX_THREADS) || !defined(RR_UNROLL)
#error "row_reduce.cu: the host passes RR_MAX_THREADS and RR_UNROLL (-D)"
#endif
static_assert(RR_MAX_THREADS % 32 == 0 && RR_MAX_THREADS <= 1024, "row_reduce.cu: whole warps, one block");

// The reductions (the host's codes, cupy_ops/ops/row_reduce.py REDUCTIONS).
#define RR_SUM 0
#define RR_MEAN 1
#define RR_AMAX 2
#define RR_AMIN 3
#define RR_LOGSUMEXP 4
#define RR_SOFTMAX 5

// The ordered key of raw bits: larger value, larger key (-0.0 just below +0.0).
template <class T> struct Key;
template <> struct Key<float> { typedef u32 K; };
template <> struct Key<f16> { typedef u32 K; };
template <> struct Key<bf16> { typedef u32 K; };
template <> struct Key<double> { typedef u64 K; };
template <class T>
__device__ __forceinline__ typename Key<T>::K order_key(typename Traits<T>::Bits b) {
  typedef typename Key<T>::K K;
  typedef typename Traits<T>::Bits Bits;
  const K s = (K)Traits<T>::SIGN;
  return (b & Traits<T>::SIGN) ? (K)(Bits)~b : (K)b | s;
}
template <class T>
__device__ __forceinline__ typename Traits<T>::Bits key_bits(typename Key<T>::K k) {
  typedef typename Traits<T>::Bits Bits;
  const typename Key<T>::K s = Traits<T>::SIGN;
  return (k & s) ? (Bits)(k & ~s) : (Bits)~(Bits)k;
}
template <class T> __device__ __forceinline__ bool is_nan_bits(typename Traits<T>::Bits b) {
  return (b & (typename Traits<T>::Bits)~Traits<T>::SIGN) > Traits<T>::INF;
}

__device__ __forceinline__ float rr_exp(float x) { return expf(x); }
__device__ __forceinline__ double rr_exp(double x) { return exp(x); }
__device__ __forceinline__ float rr_log(float x) { return logf(x); }
__device__ __forceinline__ double rr_log(double x) { return log(x); }
__device__ __forceinline__ float rr_reciprocal(float x) { return __frcp_rn(x); }
__device__ __forceinline__ double rr_reciprocal(double x) { return __drcp_rn(x); }
// exp(d) as softmax and logsumexp take it (d = x - max): 16-bit types' as exp2(d log2(e)), one
// MUFU.EX2 (2 ulp) after the product's rounding, a relative error under 1e-5 wherever fp32's exp
// does not underflow, far below the output's rounding (2^-9 / 2^-12); expf's ~10 instructions
// and IEEE division's ~8 an element made the kernel issue-bound (bf16 1024 x 8192 softmax: ~43
// instructions an element, ~20 with these and the reciprocal below).
template <class T> __device__ __forceinline__ typename Traits<T>::Acc rr_exp_of(typename Traits<T>::Acc d) {
  if constexpr (sizeof(typename Traits<T>::Bits) == 2) return exp2f(d * 1.4426950408889634f);
  else return rr_exp(d);
}
// softmax's store: e / s. 16-bit types multiply by the sum's reciprocal (rounded once a row;
// exact for the row's largest element, exp(0) / s); fp32 and fp64 divide (for fp32 the reciprocal
// corrected by its remainder, the quotient's bits without division's branch, ran no faster:
// docs/epilogues.md#row-reductions).
template <class T> struct RrSoftmax {
  typedef typename Traits<T>::Acc Acc;
  static constexpr bool BY_RECIPROCAL = sizeof(typename Traits<T>::Bits) == 2;
  Acc m, s;   // s: the sum, or its reciprocal (BY_RECIPROCAL)
  __device__ __forceinline__ RrSoftmax(Acc m_, Acc sum) : m(m_), s(BY_RECIPROCAL ? rr_reciprocal(sum) : sum) {}
  __device__ __forceinline__ void operator()(typename Traits<T>::Bits& b) const {
    const Acc e = rr_exp_of<T>(to_acc<T>(b) - m);
    b = from_acc<T>(BY_RECIPROCAL ? mul_exact(e, s) : div_exact(e, s));
  }
};
__device__ __forceinline__ bool rr_isinf(float x) { return (__float_as_uint(x) & 0x7fffffffu) == 0x7f800000u; }
__device__ __forceinline__ bool rr_isinf(double x) {
  return ((u64)__double_as_longlong(x) & 0x7fffffffffffffffull) == 0x7ff0000000000000ull;
}

struct RrMax { template <class V> __device__ __forceinline__ V operator()(V a, V b) const { return a > b ? a : b; } };
struct RrOr { __device__ __forceinline__ u32 operator()(u32 a, u32 b) const { return a | b; } };
struct RrAdd {
  __device__ __forceinline__ float operator()(float a, float b) const { return add_exact(a, b); }
  __device__ __forceinline__ double operator()(double a, double b) const { return add_exact(a, b); }
};

// The block's reduction of v by op (every thread gets it): the warp's shuffles, then the warps'
// values in order. `sh`: RR_MAX_THREADS / 32 slots; the trailing barrier frees them for the next call.
template <class V, class Op> __device__ __forceinline__ V block_reduce(V v, Op op, V* sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warps = blockDim.x >> 5;
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  v = sh[0];
  for (int w = 1; w < warps; ++w) v = op(v, sh[w]);
  __syncthreads();
  return v;
}

// Loads in flight a thread: one for float64, whose exp is a call around which the unrolled
// values spilled (16 bytes on sm_90).
#define RR_UNROLL_OF(Bits) (sizeof(Bits) == 8 ? 1 : RR_UNROLL)

// Every element of a row, in an order of the thread's own: f(Bits&) sees each once and, with
// STORE, what it leaves there is stored at orow's column. 16-byte vectors (RR_UNROLL loads in
// flight a thread) where the rows start on a 16-byte boundary, the columns past the last whole
// vector one by one; one by one where they do not.
template <bool STORE, class Bits, class F>
__device__ __forceinline__ void row_walk(const Bits* __restrict__ xr, Bits* __restrict__ orow, int n, F& f) {
  constexpr int V = 16 / sizeof(Bits), U = RR_UNROLL_OF(Bits);
  union Vec { uint4 v; Bits e[V]; };
  const int tid = threadIdx.x, T_ = blockDim.x;
  int done = 0;
  if (((reinterpret_cast<u64>(xr) | (STORE ? reinterpret_cast<u64>(orow) : 0)) & 15) == 0) {
    const uint4* xv = reinterpret_cast<const uint4*>(xr);
    uint4* ov = reinterpret_cast<uint4*>(orow);
    const int nv = n / V;
    int i = tid;
    for (; i + (U - 1) * T_ < nv; i += U * T_) {
      Vec a[U];
#pragma unroll
      for (int u = 0; u < U; ++u) a[u].v = xv[i + u * T_];
#pragma unroll
      for (int u = 0; u < U; ++u) {
#pragma unroll
        for (int e = 0; e < V; ++e) f(a[u].e[e]);
        if constexpr (STORE) ov[i + u * T_] = a[u].v;
      }
    }
    for (; i < nv; i += T_) {
      Vec a;
      a.v = xv[i];
#pragma unroll
      for (int e = 0; e < V; ++e) f(a.e[e]);
      if constexpr (STORE) ov[i] = a.v;
    }
    done = nv * V;
  }
  for (int i = done + tid; i < n; i += T_) {
    Bits b = xr[i];
    f(b);
    if constexpr (STORE) orow[i] = b;
  }
}

// Sums run in RrSumAcc: fp32 rows in fp64, rounded to fp32 once (rr_narrow), where torch sums
// in fp32. NOTES: summed in fp32, softmax erred 0.8-1.7x torch's largest error against float64
// and sum 0.9-1.7x (randn x 3, 1024 x 8192 to 512 x 32768); in fp64 0.17-0.37x, at the same
// speed (H200): the fp32 kernels are not issue-bound (docs/epilogues.md#row-reductions).
template <class T> struct RrSumAcc { typedef typename Traits<T>::Acc type; };
template <> struct RrSumAcc<float> { typedef double type; };
template <class T> __device__ __forceinline__ typename Traits<T>::Acc rr_narrow(typename RrSumAcc<T>::type v) {
  if constexpr (sizeof(typename RrSumAcc<T>::type) == sizeof(typename Traits<T>::Acc)) {
    return v;
  } else {
    float r;   // (no .ftz: a denormal sum stays one, as torch's)
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(v));
    return r;
  }
}
// The row's sum of f(element) in RrSumAcc, by the block (every thread gets it).
template <class T, class F> struct RrSum {
  typename RrSumAcc<T>::type s;
  F g;
  __device__ __forceinline__ void operator()(typename Traits<T>::Bits& b) {
    s = add_exact(s, (typename RrSumAcc<T>::type)g(b));
  }
};
template <class T> struct RrValue {
  __device__ __forceinline__ typename Traits<T>::Acc operator()(typename Traits<T>::Bits b) const { return to_acc<T>(b); }
};
template <class T> struct RrExp {
  typename Traits<T>::Acc off;
  __device__ __forceinline__ typename Traits<T>::Acc operator()(typename Traits<T>::Bits b) const {
    return rr_exp_of<T>(to_acc<T>(b) - off);
  }
};
// The largest ordered key of the row (amin: of the complemented keys), and a NaN if one was seen.
template <class T, bool MIN> struct RrBest {
  typename Key<T>::K best;
  typename Traits<T>::Bits nan_bits;
  __device__ __forceinline__ void operator()(typename Traits<T>::Bits& b) {
    typedef typename Key<T>::K K;
    const K k = MIN ? (K)~order_key<T>(b) : order_key<T>(b);
    if (is_nan_bits<T>(b)) nan_bits = b;
    else best = k > best ? k : best;
  }
};

// x: rows x n contiguous; out: rows values, or rows x n for softmax. n >= 1.
template <class T, int R>
__global__ void __launch_bounds__(RR_MAX_THREADS)
    row_reduce(const typename Traits<T>::Bits* __restrict__ x, typename Traits<T>::Bits* __restrict__ out, i64 rows,
               int n) {
  typedef typename Traits<T>::Bits Bits;
  typedef typename Traits<T>::Acc Acc;
  typedef typename RrSumAcc<T>::type S;
  typedef typename Key<T>::K K;
  __shared__ u64 sh_raw[RR_MAX_THREADS / 32];
  const int tid = threadIdx.x;
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const Bits* xr = x + row * (i64)n;
    if constexpr (R == RR_SUM || R == RR_MEAN) {
      RrSum<T, RrValue<T>> f{S(0), RrValue<T>()};
      row_walk<false>(xr, (Bits*)nullptr, n, f);
      const S s = block_reduce(f.s, RrAdd(), reinterpret_cast<S*>(sh_raw));
      if (tid == 0) out[row] = from_acc<T>(rr_narrow<T>(R == RR_MEAN ? div_exact(s, (S)n) : s));
    } else {
      RrBest<T, R == RR_AMIN> f{K(0), Bits(0)};
      row_walk<false>(xr, (Bits*)nullptr, n, f);
      const K best = block_reduce(f.best, RrMax(), reinterpret_cast<K*>(sh_raw));
      const u32 nan = block_reduce((u32)(f.nan_bits != 0), RrOr(), reinterpret_cast<u32*>(sh_raw));
      if constexpr (R == RR_AMAX || R == RR_AMIN) {
        if (nan) {
          if (f.nan_bits != 0) out[row] = f.nan_bits;   // a thread that saw one writes it
        } else if (tid == 0) {
          out[row] = key_bits<T>(R == RR_AMIN ? (K)~best : best);
        }
      } else {
        const Acc m = nan ? to_acc<T>(Traits<T>::INF | (Traits<T>::INF >> 1)) : to_acc<T>(key_bits<T>(best));
        const Acc off = R == RR_LOGSUMEXP && rr_isinf(m) ? Acc(0) : m;
        RrSum<T, RrExp<T>> e{S(0), RrExp<T>{off}};
        row_walk<false>(xr, (Bits*)nullptr, n, e);
        const Acc s = rr_narrow<T>(block_reduce(e.s, RrAdd(), reinterpret_cast<S*>(sh_raw)));
        if constexpr (R == RR_LOGSUMEXP) {
          if (tid == 0) out[row] = from_acc<T>(add_exact(rr_log(s), off));
        } else {
          RrSoftmax<T> f(m, s);
          row_walk<true>(xr, out + row * (i64)n, n, f);
        }
      }
    }
  }
}
