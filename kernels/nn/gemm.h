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
void gemm_with(const CpuGemmBackend& backend, const Tensor& a, bool trans_a, const Tensor& b,
               bool trans_b, const Tensor& c, double alpha = 1.0, double beta = 0.0);

// Note [TF32 GEMMs]
// ~~~~~~~~~~~~~~~~~
// On CUDA an fp32 GEMM may round its inputs to TF32 (a 10-bit mantissa) on
// the tensor cores and still accumulate in fp32: several times faster on
// sm_80+, at about 1e-3 relative error per product instead of 1e-7. It is an
// opt-in, off by default: ZRT_TF32=1 (also "true", "on") turns it on for
// every fp32 GEMM, gemm() (compute type CUBLAS_COMPUTE_32F_FAST_TF32) and
// the cuBLASLt epilogue GEMMs of gemm_epilogue.h alike. The variable is read
// once per process (a read-only cached parse, so the libraries keep no
// mutable process state); zrt-train --tf32 sets it before any rank starts.
// Tests switch in one process through ScopedTf32Gemms, a thread-local
// override for the calling thread, the one that launches. bf16/f16 (already
// tensor-core inputs), f64 and the CPU twins are unaffected.

// True for a ZRT_TF32 value that turns TF32 on ("1", "true", "on", any case,
// surrounding spaces ignored), false for nullptr, "", "0", "false", "off";
// InvalidArgument naming the value for anything else.
bool parse_tf32(const char* value);
// Whether fp32 CUDA GEMMs launched by this thread use TF32.
bool tf32_gemms();

// Overrides ZRT_TF32 on the calling thread for its lifetime; nested
// overrides restore the previous one.
class ScopedTf32Gemms {
 public:
  explicit ScopedTf32Gemms(bool on);
  ~ScopedTf32Gemms();
  ScopedTf32Gemms(const ScopedTf32Gemms&) = delete;
  ScopedTf32Gemms& operator=(const ScopedTf32Gemms&) = delete;

 private:
  int previous_;
};

}  // namespace zrt::kernels
