// CUDA launcher of scale (see scale_math.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_scale(void* x, DType dtype, std::int64_t n, float factor, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
