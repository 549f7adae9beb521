// CUDA launcher for kernels/nn/residual_add.h: 16-byte packs when every
// pointer is 16-byte aligned (for_each_pack, grid.cuh), or with `simple` an
// element per index (Note [Fast kernels and their simple references]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_residual_add(DType dtype, std::int64_t n, const void* a, const void* b, void* out,
                         bool simple, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
