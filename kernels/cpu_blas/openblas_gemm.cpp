// The OpenBLAS backend (Note [CPU GEMM backends]); built only with OpenBLAS.
#include <cblas.h>

#include <climits>
#include <cstring>

#include "zrt/kernels/cpu_blas/cpu_gemm.h"

namespace zrt::kernels {
namespace {

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

// One call on the calling thread; c = beta * c where k is 0 (BLAS would
// refuse a zero leading dimension) or a size exceeds BLAS's int.
template <class T, class Blas>
void openblas_gemm(const GemmCall<T>& g, Blas blas) {
  if (g.k == 0 || !(fits_int(g.m) && fits_int(g.n) && fits_int(g.k) && fits_int(g.lda) &&
                    fits_int(g.ldb) && fits_int(g.ldc))) {
    isa_kernels().table<T>().gemm(g);
    return;
  }
  blas(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
       static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, g.a,
       static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta, g.c, static_cast<int>(g.ldc));
}

void sgemm(const GemmCall<float>& g) { openblas_gemm(g, cblas_sgemm); }
void dgemm(const GemmCall<double>& g) { openblas_gemm(g, cblas_dgemm); }

constexpr CpuGemmBackend kOpenBlas{CpuGemm::openblas, "openblas", sgemm, dgemm};

const CpuGemmBackend* checked_backend() {
  // A serial build (its config says SINGLE_THREADED) is not safe to call from
  // several threads; the pthread build runs single-threaded calls in the caller.
  if (std::strstr(openblas_get_config(), "SINGLE_THREADED")) return nullptr;
  openblas_set_num_threads(1);
  return &kOpenBlas;
}

}  // namespace

const CpuGemmBackend* openblas_gemm_backend() {
  static const CpuGemmBackend* backend = checked_backend();
  return backend;
}

}  // namespace zrt::kernels
