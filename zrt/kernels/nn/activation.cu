#include "zrt/kernels/nn/activation.cuh"
#include "zrt/kernels/nn/device_dtype.cuh"

namespace zrt::kernels {
namespace {

template <class T>
__global__ void activation_forward_kernel(Activation act, std::int64_t n, const T* x, T* y) {
  using A = acc_t<T>;
  ZRT_GRID_STRIDE_LOOP(i, n)
    y[i] = store<T>(activation_forward(act, load<A>(x[i])));
}

template <class T>
__global__ void activation_backward_kernel(Activation act, std::int64_t n, const T* x,
                                           const T* dy, T* dx) {
  using A = acc_t<T>;
  ZRT_GRID_STRIDE_LOOP(i, n)
    dx[i] = store<T>(activation_backward(act, load<A>(x[i]), load<A>(dy[i])));
}

}  // namespace

void activation_forward_cuda(Activation act, DType dtype, std::int64_t n, const void* x, void* y,
                             int device, cudaStream_t stream) {
  if (n == 0) return;
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "activation_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    activation_forward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        act, n, static_cast<const T*>(x), static_cast<T*>(y));
  });
  ZRT_CUDA_CHECK_LAUNCH();
}

void activation_backward_cuda(Activation act, DType dtype, std::int64_t n, const void* x,
                              const void* dy, void* dx, int device, cudaStream_t stream) {
  if (n == 0) return;
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "activation_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    activation_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        act, n, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx));
  });
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace zrt::kernels
