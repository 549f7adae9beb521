// CUDA launchers for kernels/nn/cross_entropy.h (raw pointers; losses, lse
// and loss are float, or double when dtype is f64; targets i32 or i64 per
// targets_dtype).
//
// The forward's loss mean is the fast two-pass sum of Note [Deterministic
// block sums], into `partials` (block_sum_chunks(rows) accumulators), or
// with `simple` the rows in order on one thread (Note [Fast kernels and
// their simple references]).
//
// flag: an id flag's words, or null when the host checked the targets; a
// target >= vocab is then recorded and treated as ignored (Note [Device id
// checks] in id_check.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

void launch_cross_entropy_forward(DType dtype, std::int64_t rows, std::int64_t vocab,
                                  const void* logits, const void* targets, DType targets_dtype,
                                  double normaliser, void* losses, void* lse, void* loss,
                                  void* partials, bool simple, unsigned long long* flag,
                                  cudaStream_t stream);

void launch_cross_entropy_backward(DType dtype, std::int64_t rows, std::int64_t vocab,
                                   const void* logits, const void* targets, DType targets_dtype,
                                   const void* lse, double scale, void* dlogits,
                                   unsigned long long* flag, cudaStream_t stream);

// Note [Fused classifier]: rows of `cols` logits whose first `vocab` are the
// classes; dlogits may be logits. scale = dloss / normaliser. The loss mean
// as the forward's.
void launch_cross_entropy_fused(DType dtype, std::int64_t rows, std::int64_t vocab,
                                std::int64_t cols, const void* logits, const void* targets,
                                DType targets_dtype, double normaliser, double scale, void* losses,
                                void* loss, void* dlogits, void* partials, bool simple,
                                unsigned long long* flag, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
