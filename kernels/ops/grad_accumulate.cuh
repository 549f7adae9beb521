// CUDA launcher of grad accumulate (see grad_accumulate_math.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_accumulate_grad(float* acc, const void* grad, DType grad_dtype, std::int64_t n,
                            float scale, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
