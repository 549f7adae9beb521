// CUDA launchers for kernels/nn/activation.h: 16-byte packs when every
// pointer is 16-byte aligned (for_each_pack, grid.cuh), or with `simple` an
// element per index (Note [Fast kernels and their simple references]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/kernels/nn/activation_math.h"
#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_activation_forward(Activation act, DType dtype, std::int64_t n, const void* x, void* y,
                               bool simple, cudaStream_t stream);
void launch_activation_backward(Activation act, DType dtype, std::int64_t n, const void* x,
                                const void* dy, void* dx, bool simple, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
