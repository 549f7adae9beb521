// GEMM for the model zoo: c = alpha * op(a) · op(b) + beta * c on row-major
// matrices, with op(x) = x or xᵀ, so Linear's forward and both backward GEMMs
// need no transpose copies. cuBLAS on CUDA, the CPU GEMM backend (OpenBLAS or
// Eigen, Note [CPU GEMM backends]) on the CPU; bf16/f16 inputs
// are multiplied and accumulated in fp32 (Note [Compute precision]).
#pragma once

#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// a, b, c share one floating dtype and device. Each is viewed as a 2-D matrix
// [numel / last dim, last dim] (so activations [B, T, C] need no reshape):
// op(a) is [m, k], op(b) is [k, n], c is [m, n]. beta = 0 overwrites c (never
// reading it, so it may hold garbage); beta = 1 accumulates into it.
void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          double alpha = 1.0, double beta = 0.0, Stream stream = {});
// The same on CPU tensors through a given backend instead of cpu_gemm()
// (benchmarks and tests compare them).
void gemm_with(const CpuGemmBackend& backend, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
               const Tensor& c, double alpha = 1.0, double beta = 0.0);

}  // namespace zrt::kernels
