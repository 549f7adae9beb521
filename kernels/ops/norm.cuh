// CUDA launcher of the squared norm and non-finite check (see norm_math.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `block_partials` holds 2 * norm_blocks(n) floats of device scratch; the
// f64 results land in `result_device[0..1]` (sum of squares, sum of x - x)
// and are copied to `result_host` before returning (the stream is synchronised).
void launch_squared_norm(const void* x, DType dtype, std::int64_t n, float* block_partials,
                         double* result_device, double result_host[2], cudaStream_t stream);

}  // namespace zrt::kernels::cuda
