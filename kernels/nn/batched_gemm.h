// Strided-batched GEMM: many row-major c = alpha·op(a)·op(b) + beta·c at
// fixed strides in one call, on cuBLAS's strided-batched GEMM on CUDA and the
// CPU GEMM backend on the CPU, with the very same arguments, so a path built
// of these calls (attention's, Note [Attention on GEMMs]) runs call for call
// on the CPU.
#pragma once

#include "zrt/kernels/nn/batched_gemm_shape.h"
#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// a and b share one floating dtype; c has it too or, for bf16/f16 operands,
// may be f32 (scores kept in full precision). Products accumulate in fp32
// (fp64 for f64). beta = 0 never reads c. Every matrix must lie inside its
// tensor (contiguous, offsets counted from its first element); c's matrices
// must not overlap one another. Throws InvalidArgument naming the operand
// otherwise.
void batched_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemm& g,
                  Stream stream = {});

}  // namespace zrt::kernels
