// relu: y = max(x, 0) with torch's semantics (NaN kept, -0.0 and negative denormals -> +0.0).
// Works on raw bits, so it is exact for every dtype and needs no conversion.
#include "elementwise.cuh"

template <class T>
struct ReluOp {
  typedef typename Traits<T>::Bits Bits;
  __device__ __forceinline__ Bits operator()(Bits b) const { return relu_bits<T>(b); }
};

// x, y: n elements (y may equal x for the in-place form). head, vec: see elementwise.cuh.
template <class T>
__global__ void relu(const typename Traits<T>::Bits* x, typename Traits<T>::Bits* y, i64 n,
                     i64 head, int vec) {
  elementwise_loop<1>(x, x, y, n, head, vec, ReluOp<T>());
}
