// CUDA launcher of scale (see scale_math.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `simple`: one element per index, else 16-byte vector loads where x is
// aligned (Note [Fast kernels and their simple references]); the same bits.
void launch_scale(void* x, DType dtype, std::int64_t n, float factor, bool simple,
                  cudaStream_t stream);

}  // namespace zrt::kernels::cuda
