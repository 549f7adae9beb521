// CUDA launchers for kernels/nn/embedding.h (raw pointers; ids are i32 or
// i64 per ids_dtype; offsets/rows are the device copies of the CSR grouping
// of Note [Deterministic embedding gradient]).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_embedding_forward(DType dtype, std::int64_t n, std::int64_t channels, std::int64_t seq,
                              const void* ids, DType ids_dtype, const void* wte, const void* wpe,
                              void* out, cudaStream_t stream);

// vocab rows of dwte; positions rows of dwpe (null for none); n = batch*seq.
void launch_embedding_backward(DType dtype, std::int64_t vocab, std::int64_t positions,
                               std::int64_t batch, std::int64_t seq, std::int64_t channels,
                               const std::int64_t* offsets, const std::int64_t* rows,
                               const void* dout, void* dwte, void* dwpe, bool accumulate,
                               cudaStream_t stream);

}  // namespace zrt::kernels::cuda
