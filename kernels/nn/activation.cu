#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/activation.cuh"

namespace zrt::kernels::cuda {
namespace {

template <class T>
struct ActivationForwardBody {
  Activation act;
  const T* x;
  T* y;
  __device__ void operator()(std::int64_t i) const {
    y[i] = store<T>(activation_forward(act, load<acc_t<T>>(x[i])));
  }
};

template <class T>
struct ActivationBackwardBody {
  Activation act;
  const T* x;
  const T* dy;
  T* dx;
  __device__ void operator()(std::int64_t i) const {
    using A = acc_t<T>;
    dx[i] = store<T>(activation_backward(act, load<A>(x[i]), load<A>(dy[i])));
  }
};

}  // namespace

void launch_activation_forward(Activation act, DType dtype, std::int64_t n, const void* x, void* y,
                               cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "activation_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_index(n, ActivationForwardBody<T>{act, static_cast<const T*>(x), static_cast<T*>(y)},
                   stream);
  });
}

void launch_activation_backward(Activation act, DType dtype, std::int64_t n, const void* x,
                                const void* dy, void* dx, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "activation_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_index(n,
                   ActivationBackwardBody<T>{act, static_cast<const T*>(x),
                                             static_cast<const T*>(dy), static_cast<T*>(dx)},
                   stream);
  });
}

}  // namespace zrt::kernels::cuda
