// CUDA launcher of fill: writes one `itemsize`-byte bit pattern n times.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace zrt::kernels::cuda {

// `pattern` holds the element's bits in its low `itemsize` (1, 2, 4, 8) bytes.
void launch_fill(void* dst, std::int64_t n, std::size_t itemsize, std::uint64_t pattern,
                 cudaStream_t stream);

}  // namespace zrt::kernels::cuda
