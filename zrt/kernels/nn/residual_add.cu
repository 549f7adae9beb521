#include "zrt/kernels/nn/device_dtype.cuh"
#include "zrt/kernels/nn/element.h"
#include "zrt/kernels/nn/residual_add.cuh"

namespace zrt::kernels {
namespace {

template <class T>
__global__ void residual_add_kernel(std::int64_t n, const T* a, const T* b, T* out) {
  using A = acc_t<T>;
  ZRT_GRID_STRIDE_LOOP(i, n) out[i] = store<T>(load<A>(a[i]) + load<A>(b[i]));
}

}  // namespace

void residual_add_cuda(DType dtype, std::int64_t n, const void* a, const void* b, void* out,
                       int device, cudaStream_t stream) {
  if (n == 0) return;
  CudaDeviceGuard guard(device);
  dispatch_device_floating(dtype, "residual_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    residual_add_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        n, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out));
  });
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace zrt::kernels
