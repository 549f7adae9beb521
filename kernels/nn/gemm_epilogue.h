// A Linear's GEMM with its bias (and GELU) applied in the GEMM's epilogue:
// y = x·op(w) + b, and y = gelu(x·op(w) + b) keeping the pre-activation for
// backward. cuBLASLt epilogues on CUDA where the operands fit them; the
// separate GEMMs and GELU kernel otherwise (Note [GEMM epilogues]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// Note [GEMM epilogues]
// ~~~~~~~~~~~~~~~~~~~~~
// A Linear's forward is a GEMM then a bias, and in GPT's MLP a GELU after
// that: the simple path is a GEMM broadcasting the bias (ones[rows, 1] ·
// b[1, out]), the main GEMM accumulating onto it (beta = 1), then the GELU
// kernel reading the pre-activation back. On CUDA, gemm_bias and
// gemm_bias_gelu instead run one cuBLASLt matmul whose epilogue adds the bias
// (CUBLASLT_EPILOGUE_BIAS) or adds it, writes the pre-activation to the aux
// matrix and applies GELU (CUBLASLT_EPILOGUE_GELU_AUX_BIAS): the output is
// written once and never read back. cuBLASLt's GELU is the tanh
// approximation, as zrt's (activation_math.h; the gpu suite compares them).
// Backward is unchanged (the GELU layer's backward reads the saved
// pre-activation; the bias gradient stays a GEMM against ones).
//
// The epilogue runs where gemm_epilogue_fits(): f32/bf16/f16, k >= 1, every
// dim within cuBLASLt's 32-bit sizes, each operand's address a multiple of
// kGemmEpilogueAlign bytes, and for GELU the aux matrix's leading dim (out)
// a multiple of 8, as cuBLASLt requires. Otherwise, where cuBLASLt's
// heuristic offers no algorithm for the shape, with ZRT_SIMPLE_KERNELS
// naming gemm_epilogue (Note [Fast kernels and their simple references]), and
// always on the CPU, the simple path runs: the CPU results are those of the
// separate ops, bit for bit.
//
// Handles are per thread and device as cuBLAS's (Note [cuBLAS handles]); the
// matmul descriptor, layouts and chosen algorithm are cached per thread for
// each shape (dtype, op(w), m, n, k, GELU, TF32, operand alignment). The
// workspace, kGemmEpilogueWorkspaceBytes, comes from y's allocator in the
// stream's order, so a step allocates nothing raw; 32 MiB, cuBLAS's advice
// for Hopper (less rules out some of its algorithms). fp32 GEMMs take TF32
// as gemm() does (Note [TF32 GEMMs]).

inline constexpr std::uintptr_t kGemmEpilogueAlign = 16;
inline constexpr std::int64_t kGemmEpilogueWorkspaceBytes = std::int64_t{32} << 20;

// The operands of one epilogue GEMM y[m, n] = x[m, k] · op(w)[k, n] + b[n],
// by address (pre: the GELU's pre-activation, 0 without GELU).
struct GemmEpilogueOperands {
  DType dtype = DType::f32;
  std::int64_t m = 0, n = 0, k = 0;
  bool gelu = false;
  std::uintptr_t x = 0, w = 0, bias = 0, y = 0, pre = 0;
};

// Whether cuBLASLt's epilogue may take these operands (Note [GEMM
// epilogues]); false means the simple path. A pure function of its argument.
bool gemm_epilogue_fits(const GemmEpilogueOperands& o);
// The alignment every operand address shares, a power of two capped at 256
// (cuBLASLt's default assumption): the heuristic is asked for algorithms
// needing no more, and it keys the cached plan.
std::uint32_t gemm_epilogue_alignment(const GemmEpilogueOperands& o);

// y[..., out] = x[..., in] · op(w) + bias, with op(w) = wᵀ for w [out, in]
// (trans_w) or w for w [in, out]. All share one floating dtype and device;
// bias has `out` elements; ones is 1-D with at least rows(x) ones, which the
// simple path broadcasts the bias with. beta = 0: y's contents are never read.
void gemm_bias(const Tensor& x, const Tensor& w, bool trans_w, const Tensor& bias,
               const Tensor& ones, const Tensor& y, Stream stream = {});
// pre = x·op(w) + bias and y = gelu(pre) (tanh approximation), pre and y of
// one shape [..., out], distinct.
void gemm_bias_gelu(const Tensor& x, const Tensor& w, bool trans_w, const Tensor& bias,
                    const Tensor& ones, const Tensor& pre, const Tensor& y, Stream stream = {});

}  // namespace zrt::kernels
