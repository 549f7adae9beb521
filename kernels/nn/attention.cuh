// CUDA launchers for kernels/nn/attention.h (raw pointers; lse and the
// scratch row sums are float, or double when dtype is f64).
#pragma once

#include <cuda_runtime.h>

#include "zrt/kernels/nn/attention_math.h"
#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// simple: the thread-per-row kernel instead of the tiled one (Note [Tiled
// causal attention]), which is also taken when the tiles' shared memory
// exceeds the device's per-block limit.
void launch_attention_forward(DType dtype, const AttentionDims& dims, const void* qkv, void* out,
                              void* lse, bool simple, cudaStream_t stream);

// dsum: scratch of B*H*T accumulators (D per row).
void launch_attention_backward(DType dtype, const AttentionDims& dims, const void* dout,
                               const void* qkv, const void* out, const void* lse, void* dsum,
                               void* dqkv, bool simple, cudaStream_t stream);

// Note [Flash attention on tensor cores]: bf16 or f16, head dims 16, 32, 64
// or 128 (flash_head_dim_supported); lse and dsum (B*H*T scratch) float.
void launch_flash_attention_forward(DType dtype, const AttentionDims& dims, const void* qkv,
                                    void* out, void* lse, cudaStream_t stream);
void launch_flash_attention_backward(DType dtype, const AttentionDims& dims, const void* dout,
                                     const void* qkv, const void* out, const void* lse, void* dsum,
                                     void* dqkv, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
