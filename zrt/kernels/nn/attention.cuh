// CUDA launchers for kernels/nn/attention.h (raw pointers; lse and the
// scratch row sums are float, or double when dtype is f64).
#pragma once

#include <cuda_runtime.h>

#include "zrt/kernels/nn/attention_math.h"
#include "zrt/runtime/dtype.h"

namespace zrt::kernels {

void attention_forward_cuda(DType dtype, const AttentionDims& dims, const void* qkv, void* out,
                            void* lse, int device, cudaStream_t stream);

// dsum: scratch of B*H*T accumulators.
void attention_backward_cuda(DType dtype, const AttentionDims& dims, const void* dout,
                             const void* qkv, const void* out, const void* lse, void* dsum,
                             void* dqkv, int device, cudaStream_t stream);

}  // namespace zrt::kernels
