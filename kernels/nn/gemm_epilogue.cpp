#include "zrt/kernels/nn/gemm_epilogue.h"

#include <climits>

#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/activation.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/gemm_epilogue.cuh"
#endif

namespace zrt::kernels {
namespace {

std::uintptr_t address(const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()); }

// pre: null for gemm_bias. See Note [GEMM epilogues].
void gemm_bias_on(const char* op, const Tensor& x, const Tensor& w, bool trans_w,
                  const Tensor& bias, const Tensor& ones, const Tensor* pre, const Tensor& y,
                  Stream stream) {
  check_nn_floats(op, {x, w, bias, ones, y});
  if (pre) check_nn_floats(op, {y, *pre});
  ZRT_CHECK_ARG(w.dim() == 2, op, ": weight ", w.str(), " must be 2-D");
  ZRT_CHECK_ARG(x.dim() >= 1 && y.dim() >= 1, op, ": ", x.str(), " and ", y.str(),
                " must have at least one dim");
  const std::int64_t n = trans_w ? w.size(0) : w.size(1);
  const std::int64_t k = trans_w ? w.size(1) : w.size(0);
  const std::int64_t m = matrix_rows(x);
  ZRT_CHECK_ARG(x.size(-1) == k, op, ": input ", x.str(), " must be [..., ", k, "] for weight ",
                w.str());
  ZRT_CHECK_ARG(y.size(-1) == n && matrix_rows(y) == m, op, ": output ", y.str(), " must be [", m,
                ", ", n, "]");
  check_numel(op, bias, n);
  ZRT_CHECK_ARG(ones.dim() == 1 && ones.numel() >= m, op, ": ones ", ones.str(),
                " must be 1-D with at least ", m, " elements");
  if (pre) {
    ZRT_CHECK_ARG(pre->shape() == y.shape(), op, ": pre-activation ", pre->str(), " must match ",
                  y.str());
    ZRT_CHECK_ARG(!pre->shares_storage(y), op, ": pre-activation ", pre->str(),
                  " must not share memory with ", y.str());
  }
  // Named here in this op's words: the GEMMs below would call them operands.
  for (const auto& [name, in] : {std::pair{"input", &x}, std::pair{"weight", &w},
                                 std::pair{"bias", &bias}, std::pair{"ones", &ones}}) {
    check_apart(op, y, name, *in);
    if (pre) check_apart(op, *pre, name, *in);
  }
  if (m == 0 || n == 0) return;
  if (y.device().is_cuda() && !simple_kernel(FastKernel::gemm_epilogue)) {
    const GemmEpilogueOperands o{x.dtype(),
                                 m,
                                 n,
                                 k,
                                 pre != nullptr,
                                 k ? address(x) : 0,
                                 k ? address(w) : 0,
                                 address(bias),
                                 address(y),
                                 pre ? address(*pre) : 0};
    if (gemm_epilogue_fits(o)) {
      if (pre) {
        check_operands(op, {x, w, bias, y, *pre}, stream);
      } else {
        check_operands(op, {x, w, bias, y}, stream);
      }
#ifdef ZRT_WITH_CUDA
      const Tensor workspace = Tensor::empty({kGemmEpilogueWorkspaceBytes}, DType::u8, y.device(),
                                             y.storage().allocator(), stream);
      const CudaDeviceGuard guard(y.device().index);
      if (cuda::launch_gemm_bias(x.dtype(), trans_w, m, n, k, x.data_ptr(), w.data_ptr(),
                                 bias.data_ptr(), y.data_ptr(), pre ? pre->data_ptr() : nullptr,
                                 gemm_epilogue_alignment(o), workspace.data_ptr(),
                                 static_cast<std::size_t>(kGemmEpilogueWorkspaceBytes),
                                 y.device().index, tf32_gemms(), cuda_stream(stream))) {
        return;
      }
#endif
    }
  }
  // The simple path (and the CPU's): z = ones · bᵀ, z += x · op(w), y = gelu(z).
  const Tensor& z = pre ? *pre : y;
  gemm(ones.slice(0, m).view({m, 1}), false, bias.view({1, n}), false, z, 1.0, 0.0, stream);
  gemm(x, false, w, trans_w, z, 1.0, 1.0, stream);
  if (pre) activation_forward(Activation::gelu, *pre, y, stream);
}

}  // namespace

bool gemm_epilogue_fits(const GemmEpilogueOperands& o) {
  if (o.dtype != DType::f32 && o.dtype != DType::bf16 && o.dtype != DType::f16) return false;
  if (o.m < 1 || o.n < 1 || o.k < 1 || o.m > INT_MAX || o.n > INT_MAX || o.k > INT_MAX)
    return false;
  if (o.gelu && (o.pre == 0 || o.n % 8 != 0)) return false;
  for (const std::uintptr_t a : {o.x, o.w, o.bias, o.y}) {
    if (a == 0 || a % kGemmEpilogueAlign != 0) return false;
  }
  return !o.gelu || o.pre % kGemmEpilogueAlign == 0;
}

std::uint32_t gemm_epilogue_alignment(const GemmEpilogueOperands& o) {
  std::uintptr_t bits = 256;
  for (const std::uintptr_t a : {o.x, o.w, o.bias, o.y, o.pre}) bits |= a;
  return static_cast<std::uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

void gemm_bias(const Tensor& x, const Tensor& w, bool trans_w, const Tensor& bias,
               const Tensor& ones, const Tensor& y, Stream stream) {
  gemm_bias_on("gemm_bias", x, w, trans_w, bias, ones, nullptr, y, stream);
}

void gemm_bias_gelu(const Tensor& x, const Tensor& w, bool trans_w, const Tensor& bias,
                    const Tensor& ones, const Tensor& pre, const Tensor& y, Stream stream) {
  gemm_bias_on("gemm_bias_gelu", x, w, trans_w, bias, ones, &pre, y, stream);
}

}  // namespace zrt::kernels
