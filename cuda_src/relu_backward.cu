// relu_backward: the gradient through ReLU (after a multiply by `scale`), as torch's
// threshold_backward computes it: grad_in = ref <= 0 ? 0 : grad * scale.
//
// ref decides the mask: the forward input x (relu_div) or the forward output relu(x) (relu,
// and relu(x @ w.T + b) of linear_relu_div, rounded to the dtype as torch rounds the Linear
// output): both are <= 0 exactly where x <= 0. NaN is never masked, as in torch. The tests are
// done on the raw bits, so denormals are not flushed (CuPy compiles with -ftz=true).
#include "elementwise.cuh"

template <class T>
struct ReluBackwardOp {
  typedef typename Traits<T>::Bits Bits;
  typedef typename Traits<T>::Acc Acc;
  Acc scale;
  __device__ __forceinline__ Bits operator()(Bits grad, Bits ref) const {
    const Bits mag = ref & (Bits)~Traits<T>::SIGN;
    const bool nan = mag > Traits<T>::INF;
    const bool negative = (ref & Traits<T>::SIGN) != 0;
    const bool masked = !nan && (negative || mag == 0);   // ref <= 0 (false for NaN)
    return masked ? (Bits)0 : from_acc<T>(mul_exact(to_acc<T>(grad), scale));
  }
};

// grad, ref, out: n elements, equally laid out. head, vec: see elementwise.cuh.
template <class T>
__global__ void relu_backward(const typename Traits<T>::Bits* grad, const typename Traits<T>::Bits* ref,
                              typename Traits<T>::Bits* out, i64 n, i64 head, int vec,
                              typename Traits<T>::Acc scale) {
  ReluBackwardOp<T> op;
  op.scale = scale;
  elementwise_loop<2>(grad, ref, out, n, head, vec, op);
}
