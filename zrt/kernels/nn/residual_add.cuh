// CUDA launcher for kernels/nn/residual_add.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels {

void residual_add_cuda(DType dtype, std::int64_t n, const void* a, const void* b, void* out,
                       int device, cudaStream_t stream);

}  // namespace zrt::kernels
