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
  __device__ void pack(std::int64_t p) const {
    const Pack<T> px = reinterpret_cast<const Pack<T>*>(x)[p];
    Pack<T> py;
#pragma unroll
    for (int j = 0; j < Pack<T>::kLen; ++j)
      py.v[j] = store<T>(activation_forward(act, load<acc_t<T>>(px.v[j])));
    reinterpret_cast<Pack<T>*>(y)[p] = py;
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
  __device__ void pack(std::int64_t p) const {
    using A = acc_t<T>;
    const Pack<T> px = reinterpret_cast<const Pack<T>*>(x)[p],
                  pdy = reinterpret_cast<const Pack<T>*>(dy)[p];
    Pack<T> pdx;
#pragma unroll
    for (int j = 0; j < Pack<T>::kLen; ++j)
      pdx.v[j] = store<T>(activation_backward(act, load<A>(px.v[j]), load<A>(pdy.v[j])));
    reinterpret_cast<Pack<T>*>(dx)[p] = pdx;
  }
};

}  // namespace

void launch_activation_forward(Activation act, DType dtype, std::int64_t n, const void* x, void* y,
                               bool simple, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "activation_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ActivationForwardBody<T> body{act, static_cast<const T*>(x), static_cast<T*>(y)};
    for_each_pack_or_index<T>(n, body, !simple && pack_aligned(x, y), stream);
  });
}

void launch_activation_backward(Activation act, DType dtype, std::int64_t n, const void* x,
                                const void* dy, void* dx, bool simple, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "activation_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ActivationBackwardBody<T> body{act, static_cast<const T*>(x), static_cast<const T*>(dy),
                                         static_cast<T*>(dx)};
    for_each_pack_or_index<T>(n, body, !simple && pack_aligned(x, dy, dx), stream);
  });
}

}  // namespace zrt::kernels::cuda
