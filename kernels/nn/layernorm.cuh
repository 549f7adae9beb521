// CUDA launchers for kernels/nn/layernorm.h (raw pointers; mean/rstd are
// float, or double when dtype is f64).
//
// The backward's weight and bias gradients are the fast two-pass tile sums
// of layernorm_math.h into `partials` (2 · layernorm_param_tiles(rows) · c
// accumulators), or with `simple` a thread per feature over every row in
// order (Note [Fast kernels and their simple references]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_layernorm_forward(DType dtype, std::int64_t rows, std::int64_t c, const void* x,
                              const void* weight, const void* bias, void* y, void* mean, void* rstd,
                              double eps, cudaStream_t stream);

void launch_layernorm_backward(DType dtype, std::int64_t rows, std::int64_t c, const void* dy,
                               const void* x, const void* weight, const void* mean,
                               const void* rstd, void* dx, void* dweight, void* dbias,
                               bool accumulate_param_grads, void* partials, bool simple,
                               cudaStream_t stream);

}  // namespace zrt::kernels::cuda
