// CUDA launcher of fill: writes one element's bit pattern n times.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `pattern` holds the element's bits in its low dtype_size(dtype) bytes.
// `simple`: one element per index, else 16-byte vector stores where dst is
// aligned (Note [Fast kernels and their simple references]); the same bits.
void launch_fill(void* dst, DType dtype, std::int64_t n, std::uint64_t pattern, bool simple,
                 cudaStream_t stream);

}  // namespace zrt::kernels::cuda
