// cuBLAS launcher for kernels/nn/gemm.h (raw pointers, row-major operands).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// c[m, n] = alpha * op(a) · op(b) + beta * c, row-major, fp32 accumulation
// for f32/bf16/f16 and fp64 for f64. `device` (the current one) keys the
// calling thread's cuBLAS handle (Note [cuBLAS handles]). `tf32`: f32 takes
// the TF32 tensor-core compute type (Note [TF32 GEMMs]); other dtypes ignore it.
void launch_gemm(DType dtype, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, double alpha, const void* a, const void* b, double beta, void* c,
                 int device, bool tf32, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
