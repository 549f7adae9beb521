#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <unordered_map>

#include "zrt/kernels/nn/gemm.cuh"
#include "zrt/runtime/cuda_check.h"

namespace zrt::kernels::cuda {
namespace {

#define ZRT_CUBLAS_CHECK(expr)                                                            \
  do {                                                                                    \
    cublasStatus_t zrt_cublas_status_ = (expr);                                           \
    ZRT_CHECK_AS(::zrt::CublasError, zrt_cublas_status_ == CUBLAS_STATUS_SUCCESS,         \
                 "cuBLAS error ", cublasGetStatusName(zrt_cublas_status_));               \
  } while (0)

// Note [cuBLAS handles]
// ~~~~~~~~~~~~~~~~~~~~~
// A cuBLAS handle is costly to create and must not be used by two host threads
// at once. Ranks of one process are threads, so each thread keeps its own
// handle per device (thread_local, never shared); the stream is set per call.
struct HandleCache {
  std::unordered_map<int, cublasHandle_t> handles;
  ~HandleCache() {
    for (auto& [dev, h] : handles) cublasDestroy(h);
  }
  cublasHandle_t get(int device) {
    auto it = handles.find(device);
    if (it != handles.end()) return it->second;
    cublasHandle_t h = nullptr;
    ZRT_CUBLAS_CHECK(cublasCreate(&h));
    handles.emplace(device, h);
    return h;
  }
};

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    case DType::f64: return CUDA_R_64F;
    default: break;
  }
  ZRT_THROW(InvalidArgument, "gemm: dtype ", dtype_name(t), " is not supported by cuBLAS GEMM");
}

}  // namespace

void launch_gemm(DType dtype, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, double alpha, const void* a, const void* b, double beta, void* c,
                 int device, bool tf32, cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  ZRT_CHECK_ARG(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "gemm: dims ", m, "x", n, "x", k,
                " exceed cuBLAS's 32-bit sizes");
  thread_local HandleCache cache;
  cublasHandle_t h = cache.get(device);
  ZRT_CUBLAS_CHECK(cublasSetStream(h, stream));
  // Row-major c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ: swap the
  // operands and keep each op; leading dims are the stored row lengths.
  // (cuBLAS wants leading dims >= 1 even when k = 0, where c = beta * c.)
  const int lda = static_cast<int>(std::max<std::int64_t>(1, trans_a ? m : k));
  const int ldb = static_cast<int>(std::max<std::int64_t>(1, trans_b ? k : n));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t t = cuda_type(dtype);
  if (dtype == DType::f64) {
    ZRT_CUBLAS_CHECK(cublasGemmEx(h, op_b, op_a, int(n), int(m), int(k), &alpha, b, t, ldb, a, t,
                                  lda, &beta, c, t, int(n), CUBLAS_COMPUTE_64F,
                                  CUBLAS_GEMM_DEFAULT));
  } else {
    const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
    ZRT_CUBLAS_CHECK(cublasGemmEx(h, op_b, op_a, int(n), int(m), int(k), &alpha_f, b, t, ldb, a,
                                  t, lda, &beta_f, c, t, int(n),
                                  tf32 && dtype == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                              : CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace zrt::kernels::cuda
