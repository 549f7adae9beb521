// The calling thread's cuBLAS handle per device and the dtype mapping, for
// the cuBLAS launchers (gemm.cu, batched_gemm.cu). .cu only.
#pragma once

#include <unordered_map>

#include "zrt/kernels/nn/cublas_library.cuh"
#include "zrt/runtime/cuda_check.h"
#include "zrt/runtime/dtype.h"
#include "zrt/runtime/error.h"

#define ZRT_CUBLAS_CHECK(expr)                                                                     \
  do {                                                                                             \
    cublasStatus_t zrt_cublas_status_ = (expr);                                                    \
    ZRT_CHECK_AS(::zrt::CublasError, zrt_cublas_status_ == CUBLAS_STATUS_SUCCESS, "cuBLAS error ", \
                 ::zrt::kernels::cuda::cublas().status_name(zrt_cublas_status_));                  \
  } while (0)

namespace zrt::kernels::cuda {

// Note [cuBLAS handles]
// ~~~~~~~~~~~~~~~~~~~~~
// A cuBLAS handle is costly to create and must not be used by two host threads
// at once. Ranks of one process are threads, so each thread keeps its own
// handle per device (thread_local, never shared); the stream is set per call.
inline cublasHandle_t cublas_handle(int device) {
  struct HandleCache {
    std::unordered_map<int, cublasHandle_t> handles;
    ~HandleCache() {
      for (auto& [dev, h] : handles) cublas().destroy(h);
    }
  };
  thread_local HandleCache cache;
  auto it = cache.handles.find(device);
  if (it != cache.handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  ZRT_CUBLAS_CHECK(cublas().create(&h));
  cache.handles.emplace(device, h);
  return h;
}

// The cuBLAS data type of a floating dtype; `op` names the caller in the error.
inline cudaDataType_t cublas_type(DType t, const char* op) {
  switch (t) {
    case DType::f32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    case DType::f64:
      return CUDA_R_64F;
    default:
      break;
  }
  ZRT_THROW(InvalidArgument, op, ": dtype ", dtype_name(t), " is not supported by cuBLAS GEMM");
}

}  // namespace zrt::kernels::cuda
