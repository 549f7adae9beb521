// CUDA launcher for kernels/nn/residual_add.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_residual_add(DType dtype, std::int64_t n, const void* a, const void* b, void* out,
                         cudaStream_t stream);

}  // namespace zrt::kernels::cuda
