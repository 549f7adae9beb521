// CUDA launchers for kernels/nn/embedding.h (raw pointers; ids are i32 or
// i64 per ids_dtype; offsets/rows are the device copies of the CSR grouping
// of Note [Deterministic embedding gradient]).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// flag: an id flag's words, or null when the host checked the ids; a bad id
// reads no table row (Note [Device id checks]).
void launch_embedding_forward(DType dtype, std::int64_t n, std::int64_t channels, std::int64_t seq,
                              std::int64_t vocab, const void* ids, DType ids_dtype, const void* wte,
                              const void* wpe, void* out, unsigned long long* flag,
                              cudaStream_t stream);

// Records the bad ids among the n of `ids` in `flag`.
void launch_embedding_check_ids(std::int64_t n, std::int64_t vocab, const void* ids,
                                DType ids_dtype, unsigned long long* flag, cudaStream_t stream);

// The device CSR grouping of Note [Deterministic embedding gradient]: offsets
// [vocab + 1] and rows [n], both in the caller's scratch.
struct TokenGroupsDev {
  const std::int64_t* offsets;
  const std::int64_t* rows;
};

// The scratch bytes launch_embedding_group_tokens needs (n < 2^31, vocab <
// 2^31 - 1); asks CUB, launches nothing.
std::size_t embedding_group_scratch_bytes(std::int64_t n, std::int64_t vocab, cudaStream_t stream);

// Groups the n positions of `ids` by token on the device: the keys (a bad
// id, recorded in `flag` when given, goes to bucket vocab, past every
// gradient row), a stable CUB radix sort of (token, position), then each
// token's first index by binary search. No host copy, no sync.
TokenGroupsDev launch_embedding_group_tokens(std::int64_t n, std::int64_t vocab, const void* ids,
                                             DType ids_dtype, void* scratch,
                                             std::size_t scratch_bytes, unsigned long long* flag,
                                             cudaStream_t stream);

// vocab rows of dwte; positions rows of dwpe (null for none); n = batch*seq.
void launch_embedding_backward(DType dtype, std::int64_t vocab, std::int64_t positions,
                               std::int64_t batch, std::int64_t seq, std::int64_t channels,
                               const std::int64_t* offsets, const std::int64_t* rows,
                               const void* dout, void* dwte, void* dwpe, bool accumulate,
                               cudaStream_t stream);

}  // namespace zrt::kernels::cuda
