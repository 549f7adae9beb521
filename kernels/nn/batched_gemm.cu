#include <algorithm>
#include <climits>
#include <cstdint>

#include "zrt/kernels/nn/batched_gemm.cuh"
#include "zrt/kernels/nn/cublas_handle.cuh"

namespace zrt::kernels::cuda {

void launch_batched_gemm(DType ab, DType c_dtype, const BatchedGemm& g, const void* a,
                         const void* b, void* c, int device, bool tf32, cudaStream_t stream) {
  if (g.m == 0 || g.n == 0 || g.outer == 0 || g.inner == 0) return;
  // One cuBLAS call covers the whole batch when the outer stride continues
  // the inner one for every operand; otherwise one call per outer index.
  const bool flat =
      g.outer == 1 || (g.a.outer == g.inner * g.a.inner && g.b.outer == g.inner * g.b.inner &&
                       g.c.outer == g.inner * g.c.inner);
  const std::int64_t calls = flat ? 1 : g.outer;
  const std::int64_t batch = flat ? g.outer * g.inner : g.inner;
  ZRT_CHECK_ARG(g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX && batch <= INT_MAX &&
                    std::max({g.a.ld, g.b.ld, g.c.ld}) <= INT_MAX,
                "batched_gemm: dims ", g.m, "x", g.n, "x", g.k, " (batch ", batch,
                ") exceed cuBLAS's 32-bit sizes");
  cublasHandle_t h = cublas_handle(device);
  ZRT_CUBLAS_CHECK(cublas().set_stream(h, stream));
  // Row-major c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ: swap the
  // operands and keep each op (as launch_gemm); the leading dims are the
  // stored rows' strides.
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  // With k = 0 (c = beta·c) neither operand is read, but cuBLAS still wants
  // leading dims of at least their rows: any dim of the call is enough.
  const std::int64_t any = g.k ? 1 : std::max<std::int64_t>({g.m, g.n, 1});
  const int lda = int(std::max<std::int64_t>(g.a.ld, any));
  const int ldb = int(std::max<std::int64_t>(g.b.ld, any));
  const int ldc = int(std::max<std::int64_t>(g.c.ld, 1));
  const cudaDataType_t t_ab = cublas_type(ab, "batched_gemm");
  const cudaDataType_t t_c = cublas_type(c_dtype, "batched_gemm");
  const std::size_t ab_bytes = dtype_size(ab), c_bytes = dtype_size(c_dtype);
  const bool f64 = ab == DType::f64;
  const double alpha_d = g.alpha, beta_d = g.beta;
  const float alpha_f = float(g.alpha), beta_f = float(g.beta);
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  const cublasComputeType_t compute = f64                        ? CUBLAS_COMPUTE_64F
                                      : tf32 && ab == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                 : CUBLAS_COMPUTE_32F;
  for (std::int64_t i = 0; i < calls; ++i) {
    // a and b are null when k = 0 (c = beta·c reads neither).
    const char* pa =
        g.k ? static_cast<const char*>(a) + i * g.a.outer * std::int64_t(ab_bytes) : nullptr;
    const char* pb =
        g.k ? static_cast<const char*>(b) + i * g.b.outer * std::int64_t(ab_bytes) : nullptr;
    auto* pc = static_cast<char*>(c) + i * g.c.outer * std::int64_t(c_bytes);
    ZRT_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(
        h, op_b, op_a, int(g.n), int(g.m), int(g.k), alpha, pb, t_ab, ldb, g.b.inner, pa, t_ab, lda,
        g.a.inner, beta, pc, t_c, ldc, g.c.inner, int(batch), compute, CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace zrt::kernels::cuda
