// CUDA launchers for kernels/nn/layernorm.h (raw pointers; mean/rstd are
// float, or double when dtype is f64).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_layernorm_forward(DType dtype, std::int64_t rows, std::int64_t c, const void* x,
                              const void* weight, const void* bias, void* y, void* mean,
                              void* rstd, double eps, cudaStream_t stream);

void launch_layernorm_backward(DType dtype, std::int64_t rows, std::int64_t c, const void* dy,
                               const void* x, const void* weight, const void* mean,
                               const void* rstd, void* dx, void* dweight, void* dbias,
                               bool accumulate_param_grads, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
