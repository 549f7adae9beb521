#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "zrt/kernels/nn/cublas_library.cuh"
#include "zrt/runtime/error.h"

namespace zrt::kernels::cuda {
namespace {

// The two overloaded entry points: the table's types must pick cuBLAS's C
// functions (unevaluated, so no link to the library).
static_assert(
    std::is_same_v<decltype(static_cast<decltype(CublasLibrary::gemm_ex)>(&::cublasGemmEx)),
                   decltype(CublasLibrary::gemm_ex)>);
static_assert(std::is_same_v<decltype(static_cast<decltype(CublasLibrary::gemm_strided_batched_ex)>(
                                 &::cublasGemmStridedBatchedEx)),
                             decltype(CublasLibrary::gemm_strided_batched_ex)>);

void* open_library(const char* soname, const char* toolkit_dir) {
  if (void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return lib;
  const std::string by_name = dlerror();
  const std::string path = std::string(toolkit_dir) + "/" + soname;
  if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
  ZRT_THROW(ResourceError, "cannot load ", soname, " (", by_name,
            "): a CUDA run needs the CUDA toolkit's cuBLAS, from the library path "
            "(LD_LIBRARY_PATH) or ",
            toolkit_dir);
}

template <class F>
void resolve(F& fn, void* lib, const char* soname, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  ZRT_CHECK_AS(ResourceError, fn != nullptr, soname, " has no function ", name,
               ": zrt needs the cuBLAS of CUDA ", ZRT_CUBLAS_SOVERSION, " or later");
}

}  // namespace

CublasSonames cublas_sonames() {
  return {"libcublas.so." ZRT_CUBLAS_SOVERSION, "libcublasLt.so." ZRT_CUBLAS_SOVERSION,
          ZRT_CUDA_TOOLKIT_LIBRARY_DIR};
}

CublasLibrary load_cublas(const CublasSonames& names) {
  // cuBLASLt first: libcublas needs it, and finds it loaded by its soname.
  void* lt = open_library(names.cublas_lt, names.toolkit_dir);
  void* blas = open_library(names.cublas, names.toolkit_dir);
  CublasLibrary f{};
#define ZRT_RESOLVE(field, lib, soname, name) resolve(f.field, lib, soname, #name)
  ZRT_RESOLVE(create, blas, names.cublas, cublasCreate_v2);
  ZRT_RESOLVE(destroy, blas, names.cublas, cublasDestroy_v2);
  ZRT_RESOLVE(set_stream, blas, names.cublas, cublasSetStream_v2);
  ZRT_RESOLVE(status_name, blas, names.cublas, cublasGetStatusName);
  ZRT_RESOLVE(gemm_ex, blas, names.cublas, cublasGemmEx);
  ZRT_RESOLVE(gemm_strided_batched_ex, blas, names.cublas, cublasGemmStridedBatchedEx);
  ZRT_RESOLVE(lt_create, lt, names.cublas_lt, cublasLtCreate);
  ZRT_RESOLVE(lt_destroy, lt, names.cublas_lt, cublasLtDestroy);
  ZRT_RESOLVE(lt_matmul_desc_create, lt, names.cublas_lt, cublasLtMatmulDescCreate);
  ZRT_RESOLVE(lt_matmul_desc_destroy, lt, names.cublas_lt, cublasLtMatmulDescDestroy);
  ZRT_RESOLVE(lt_matmul_desc_set_attribute, lt, names.cublas_lt, cublasLtMatmulDescSetAttribute);
  ZRT_RESOLVE(lt_matrix_layout_create, lt, names.cublas_lt, cublasLtMatrixLayoutCreate);
  ZRT_RESOLVE(lt_matrix_layout_destroy, lt, names.cublas_lt, cublasLtMatrixLayoutDestroy);
  ZRT_RESOLVE(lt_matmul_preference_create, lt, names.cublas_lt, cublasLtMatmulPreferenceCreate);
  ZRT_RESOLVE(lt_matmul_preference_destroy, lt, names.cublas_lt, cublasLtMatmulPreferenceDestroy);
  ZRT_RESOLVE(lt_matmul_preference_set_attribute, lt, names.cublas_lt,
              cublasLtMatmulPreferenceSetAttribute);
  ZRT_RESOLVE(lt_matmul_algo_get_heuristic, lt, names.cublas_lt, cublasLtMatmulAlgoGetHeuristic);
  ZRT_RESOLVE(lt_matmul, lt, names.cublas_lt, cublasLtMatmul);
#undef ZRT_RESOLVE
  return f;
}

const CublasLibrary& cublas() {
  static const CublasLibrary library = load_cublas(cublas_sonames());
  return library;
}

}  // namespace zrt::kernels::cuda
