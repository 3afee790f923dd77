// relu_backward: the gradient through ReLU (and a following multiply by `scale`), as torch's
// threshold_backward computes it: grad_in = masked(ref) ? 0 : grad * scale.
//
// ref is what decides the mask: the forward input x (relu, relu_div: masked where x <= 0),
// or the forward output y of linear_relu_div, y = relu(z) * scale (masked where y <= 0 for
// scale > 0, where y >= 0 for scale < 0: `flip`). NaN is never masked, as in torch. The tests
// are done on the raw bits, so denormals are not flushed (CuPy compiles with -ftz=true).
#include "elementwise.cuh"

template <class T>
struct ReluBackwardOp {
  typedef typename Traits<T>::Bits Bits;
  typedef typename Traits<T>::Acc Acc;
  Acc scale;
  int flip;
  __device__ __forceinline__ Bits operator()(Bits grad, Bits ref) const {
    const Bits mag = ref & (Bits)~Traits<T>::SIGN;
    const bool nan = mag > Traits<T>::INF;
    const bool negative = (ref & Traits<T>::SIGN) != 0;
    // ref <= 0: negative or +0; ref >= 0: positive or -0 (both false for NaN)
    const bool masked = !nan && (flip ? (!negative || mag == 0) : (negative || mag == 0));
    return masked ? (Bits)0 : from_acc<T>(mul_exact(to_acc<T>(grad), scale));
  }
};

// grad, ref, out: n elements, equally laid out. head, vec: see elementwise.cuh.
template <class T>
__global__ void relu_backward(const typename Traits<T>::Bits* grad, const typename Traits<T>::Bits* ref,
                              typename Traits<T>::Bits* out, i64 n, i64 head, int vec,
                              typename Traits<T>::Acc scale, int flip) {
  ReluBackwardOp<T> op;
  op.scale = scale;
  op.flip = flip;
  elementwise_loop<2>(grad, ref, out, n, head, vec, op);
}
