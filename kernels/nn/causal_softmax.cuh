// CUDA launchers for kernels/nn/causal_softmax.h: a warp per row (raw
// pointers; `dtype` is the probabilities', the scores and lse are float, or
// double for f64).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// rows = pairs · seq.
void launch_causal_softmax_forward(DType dtype, std::int64_t rows, std::int64_t seq,
                                   const void* scores, void* probs, void* lse, cudaStream_t stream);
void launch_causal_softmax_recompute(DType dtype, std::int64_t rows, std::int64_t seq,
                                     const void* scores, const void* lse, void* probs,
                                     cudaStream_t stream);
void launch_causal_softmax_backward(DType dtype, std::int64_t rows, std::int64_t seq,
                                    const void* probs, const void* dprobs, void* dscores,
                                    cudaStream_t stream);

}  // namespace zrt::kernels::cuda
