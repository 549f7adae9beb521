// CUDA launcher of random_fill (see random_fill_math.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/kernels/ops/random_fill_math.h"

namespace zrt::kernels::cuda {

void launch_random_fill(float* dst, std::int64_t n, RandomInit dist, std::uint64_t seed,
                        std::uint64_t stream, std::int64_t first_index, cudaStream_t s);

}  // namespace zrt::kernels::cuda
