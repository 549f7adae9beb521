#include <algorithm>
#include <climits>

#include "zrt/kernels/nn/cublas_handle.cuh"
#include "zrt/kernels/nn/gemm.cuh"

namespace zrt::kernels::cuda {

void launch_gemm(DType dtype, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, double alpha, const void* a, const void* b, double beta, void* c,
                 int device, bool tf32, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  ZRT_CHECK_ARG(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "gemm: dims ", m, "x", n, "x", k,
                " exceed cuBLAS's 32-bit sizes");
  cublasHandle_t h = cublas_handle(device);
  ZRT_CUBLAS_CHECK(cublas().set_stream(h, stream));
  // Row-major c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ: swap the
  // operands and keep each op; leading dims are the stored row lengths.
  // (cuBLAS wants leading dims >= 1 even when k = 0, where c = beta * c.)
  const int lda = static_cast<int>(std::max<std::int64_t>(1, trans_a ? m : k));
  const int ldb = static_cast<int>(std::max<std::int64_t>(1, trans_b ? k : n));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t t = cublas_type(dtype, "gemm");
  if (dtype == DType::f64) {
    ZRT_CUBLAS_CHECK(cublas().gemm_ex(h, op_b, op_a, int(n), int(m), int(k), &alpha, b, t, ldb, a,
                                      t, lda, &beta, c, t, int(n), CUBLAS_COMPUTE_64F,
                                      CUBLAS_GEMM_DEFAULT));
  } else {
    const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
    ZRT_CUBLAS_CHECK(cublas().gemm_ex(
        h, op_b, op_a, int(n), int(m), int(k), &alpha_f, b, t, ldb, a, t, lda, &beta_f, c, t,
        int(n), tf32 && dtype == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace zrt::kernels::cuda
