// cuBLAS launcher for kernels/nn/batched_gemm.h (raw pointers, row-major
// operands).
#pragma once

#include <cuda_runtime.h>

#include "zrt/kernels/nn/batched_gemm_shape.h"
#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// a and b of dtype `ab`, c of `c_dtype` (ab, or f32 for bf16/f16 operands);
// fp32 accumulation (fp64 for f64). `device` keys the calling thread's cuBLAS
// handle (Note [cuBLAS handles]); `tf32` as launch_gemm's.
void launch_batched_gemm(DType ab, DType c_dtype, const BatchedGemm& g, const void* a,
                         const void* b, void* c, int device, bool tf32, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
