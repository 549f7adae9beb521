// CUDA launcher of the squared norm and non-finite check (see norm_math.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `block_partials` holds 2 * norm_blocks(n) floats of device scratch, 8-byte
// aligned (read as pairs); the f64 results land in `result_device[0..1]`: the
// sum of squares, and the sum of x - x (NaN when some element is not finite)
// or, with `flag_non_finite`, 1 or 0 for whether it is NaN. Asynchronous on
// `stream`.
void launch_squared_norm(const void* x, DType dtype, std::int64_t n, float* block_partials,
                         double* result_device, bool flag_non_finite, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
