// CUDA error checks and the device guard, for files compiled when
// ZRT_WITH_CUDA is defined; elsewhere this header is empty, so an installed
// zrt without CUDA never reaches for CUDA's headers.
#pragma once

#ifdef ZRT_WITH_CUDA
#include <cuda_runtime.h>

#include "zrt/runtime/error.h"

#define ZRT_CUDA_CHECK(expr)                                                                      \
  do {                                                                                            \
    cudaError_t zrt_cuda_status_ = (expr);                                                        \
    ZRT_CHECK_AS(::zrt::CudaError, zrt_cuda_status_ == cudaSuccess, "CUDA error ",                \
                 cudaGetErrorName(zrt_cuda_status_), ": ", cudaGetErrorString(zrt_cuda_status_)); \
  } while (0)

namespace zrt {

// Makes `device` current for the guard's lifetime, restoring the previous one.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    ZRT_CUDA_CHECK(cudaGetDevice(&previous_));
    changed_ = previous_ != device;
    if (changed_) ZRT_CUDA_CHECK(cudaSetDevice(device));
  }
  // Restores only a device it changed: setting an unused device would create
  // a context there (CUDA 12+), e.g. on GPU 0 in every rank process.
  ~CudaDeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace zrt

#endif  // ZRT_WITH_CUDA
