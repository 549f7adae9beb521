// CUDA launcher of fill: writes one element's bit pattern n times.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `pattern` holds the element's bits in its low dtype_size(dtype) bytes.
void launch_fill(void* dst, DType dtype, std::int64_t n, std::uint64_t pattern,
                 cudaStream_t stream);

}  // namespace zrt::kernels::cuda
