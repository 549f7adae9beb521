// CUDA launchers for kernels/nn/cross_entropy.h (raw pointers; losses, lse
// and loss are float, or double when dtype is f64; targets int32 or int64).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels {

void cross_entropy_forward_cuda(DType dtype, std::int64_t rows, std::int64_t vocab,
                                const void* logits, const void* targets, bool targets_are_i64,
                                double normaliser, void* losses, void* lse, void* loss, int device,
                                cudaStream_t stream);

void cross_entropy_backward_cuda(DType dtype, std::int64_t rows, std::int64_t vocab,
                                 const void* logits, const void* targets, bool targets_are_i64,
                                 const void* lse, double scale, void* dlogits, int device,
                                 cudaStream_t stream);

}  // namespace zrt::kernels
