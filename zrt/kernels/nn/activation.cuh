// CUDA launchers for kernels/nn/activation.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/kernels/nn/activation_math.h"
#include "zrt/runtime/dtype.h"

namespace zrt::kernels {

void activation_forward_cuda(Activation act, DType dtype, std::int64_t n, const void* x, void* y,
                             int device, cudaStream_t stream);
void activation_backward_cuda(Activation act, DType dtype, std::int64_t n, const void* x,
                              const void* dy, void* dx, int device, cudaStream_t stream);

}  // namespace zrt::kernels
