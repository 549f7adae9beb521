// Element-wise reductions on host memory in a dtype's host type, shared by the
// CPU paths of every backend (the local backend, MPI's bf16/f16 operator).
//
// Note [Deterministic reduction order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Sums are taken in rank order, one addition at a time in the dtype's own host
// type (bf16 + bf16 rounds to bf16 after each step), so every rank and every
// run gets the same bits. avg is the sum divided by the group size: a floating
// division for floating dtypes, an integer division (towards zero) for
// integer dtypes.
#pragma once

#include <cstdint>
#include <span>

#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/dtype.h"

namespace zrt {

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... in that order, for i < numel;
// avg divides the sum by srcs.size(). dst may alias any of srcs.
void host_reduce(void* dst, std::span<const void* const> srcs, std::int64_t numel, DType dtype,
                 ReduceOp op);

// inout[i] = in[i] (op) inout[i]; avg accumulates a sum (finish with host_divide).
void host_accumulate(const void* in, void* inout, std::int64_t numel, DType dtype, ReduceOp op);

// data[i] /= divisor (integer division for integer dtypes).
void host_divide(void* data, std::int64_t numel, DType dtype, int divisor);

}  // namespace zrt
