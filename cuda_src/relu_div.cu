// relu_div: y = relu(x) / divisor in one pass, bit for bit as torch's `torch.relu(x) / d`.
//
// torch divides by a Python number (or a CPU scalar tensor) by multiplying with its
// reciprocal computed on the host (at::native div_true_kernel_cuda), so the host passes
// `scale` = 1 / d rounded the way torch rounds it, and the kernel multiplies. A divisor
// that lives on the GPU is divided by truly, as torch does then: `divisor` points at it
// (already in the compute type) and `scale` is ignored.
#include "elementwise.cuh"

template <class T>
struct ReluDivOp {
  typedef typename Traits<T>::Bits Bits;
  typedef typename Traits<T>::Acc Acc;
  Acc scale;
  Acc divisor;
  bool true_div;
  __device__ __forceinline__ Bits operator()(Bits b) const {
    const Acc v = to_acc<T>(relu_bits<T>(b));
    return from_acc<T>(true_div ? div_exact(v, divisor) : mul_exact(v, scale));
  }
};

template <class T>
__global__ void relu_div(const typename Traits<T>::Bits* x, typename Traits<T>::Bits* y, i64 n,
                         i64 head, int vec, typename Traits<T>::Acc scale,
                         const typename Traits<T>::Acc* divisor) {
  ReluDivOp<T> op;
  op.scale = scale;
  op.true_div = divisor != nullptr;
  op.divisor = op.true_div ? *divisor : scale;
  elementwise_loop<1>(x, x, y, n, head, vec, op);
}
