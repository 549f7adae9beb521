// CUDA launcher of grad accumulate (see grad_accumulate_math.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `simple`: one element per index, else 16-byte vector loads where acc and
// grad are aligned (Note [Fast kernels and their simple references]); the
// same bits.
void launch_accumulate_grad(float* acc, const void* grad, DType grad_dtype, std::int64_t n,
                            float scale, bool simple, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
