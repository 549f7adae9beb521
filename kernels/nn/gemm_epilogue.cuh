// cuBLASLt launcher for kernels/nn/gemm_epilogue.h (raw pointers, row-major
// operands; Note [GEMM epilogues]).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// y[m, n] = x[m, k] · op(w) + bias[n] (op(w) = wᵀ for w [n, k] if trans_w,
// else w [k, n]), row-major; with `pre` non-null also pre = that sum and
// y = gelu(pre). `align`: the alignment all addresses share
// (gemm_epilogue_alignment). `device` (the current one) keys the calling
// thread's cuBLASLt handle and plans. Returns false, launching nothing, when
// cuBLASLt offers no algorithm for the shape (the caller runs the simple
// path); throws CublasError on a failed call.
bool launch_gemm_bias(DType dtype, bool trans_w, std::int64_t m, std::int64_t n, std::int64_t k,
                      const void* x, const void* w, const void* bias, void* y, void* pre,
                      std::uint32_t align, void* workspace, std::size_t workspace_bytes, int device,
                      bool tf32, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
