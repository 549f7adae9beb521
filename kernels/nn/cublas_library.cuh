// cuBLAS and cuBLASLt, loaded on first use (Note [cuBLAS loaded on first
// use]): the functions zrt calls, as one table. Host code; CUDA builds only.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace zrt::kernels::cuda {

// Note [cuBLAS loaded on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Loading libcublasLt runs its initialisers: about 0.2 s of CPU and 200 MiB
// of touched memory in every process that links it, CUDA run or not (CUDA
// 13). Linked into libzrt_kernels, every zrt-train, zrt-ckpt and test
// program of a CUDA build paid that at start, on a CPU run too, in every
// rank. So zrt links neither library: the first cuBLAS call a process makes
// opens both (dlopen by soname: LD_LIBRARY_PATH, then the toolkit directory
// the build found) and resolves the functions below, once; they stay loaded
// until the process ends, as the per-thread handles' destructors call them.
// A library that cannot be found is an error naming it, at the first GEMM
// on a GPU, not at start.
struct CublasLibrary {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSetStream_v2) set_stream;
  decltype(&::cublasGetStatusName) status_name;
  // cublas_api.h overloads these two for C++ callers: the C entry points.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t);
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int, int, int, const void*, const void*, cudaDataType,
                                            int, long long int, const void*, cudaDataType, int,
                                            long long int, const void*, void*, cudaDataType, int,
                                            long long int, int, cublasComputeType_t,
                                            cublasGemmAlgo_t);
  decltype(&::cublasLtCreate) lt_create;
  decltype(&::cublasLtDestroy) lt_destroy;
  decltype(&::cublasLtMatmulDescCreate) lt_matmul_desc_create;
  decltype(&::cublasLtMatmulDescDestroy) lt_matmul_desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) lt_matmul_desc_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) lt_matrix_layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) lt_matrix_layout_destroy;
  decltype(&::cublasLtMatmulPreferenceCreate) lt_matmul_preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) lt_matmul_preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) lt_matmul_preference_set_attribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) lt_matmul_algo_get_heuristic;
  decltype(&::cublasLtMatmul) lt_matmul;
};

// The sonames this build's toolkit gives (libcublas.so.<major>, ...) and the
// directory it found them in, tried after the loader's own search.
struct CublasSonames {
  const char* cublas;
  const char* cublas_lt;
  const char* toolkit_dir;
};
CublasSonames cublas_sonames();

// Opens both libraries and resolves every function of CublasLibrary; throws
// ResourceError naming the library or function it could not find.
CublasLibrary load_cublas(const CublasSonames& names);

// The process's table: loaded at the first call, then the same one.
const CublasLibrary& cublas();

}  // namespace zrt::kernels::cuda
