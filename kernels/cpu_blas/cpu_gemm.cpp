#include "zrt/kernels/cpu_blas/cpu_gemm.h"

#include <cstdlib>
#include <cstring>

#include "zrt/runtime/error.h"

namespace zrt::kernels {

#ifdef ZRT_WITH_OPENBLAS
// openblas_gemm.cpp: null when OpenBLAS cannot be loaded or used, for the
// reason given (Note [OpenBLAS loaded on first use]).
const CpuGemmBackend* openblas_gemm_backend();
const char* openblas_unavailable_reason();
#endif

namespace {

// Through the instruction-set copy chosen for this CPU (ZRT_CPU_ISA caps it).
template <class T>
void eigen_gemm(const GemmCall<T>& g) {
  isa_kernels().table<T>().gemm(g);
}

constexpr CpuGemmBackend kEigen{CpuGemm::eigen, "eigen", eigen_gemm<float>, eigen_gemm<double>};

}  // namespace

const CpuGemmBackend* cpu_gemm_for(CpuGemm which) {
  if (which == CpuGemm::eigen) return &kEigen;
#ifdef ZRT_WITH_OPENBLAS
  return openblas_gemm_backend();
#else
  return nullptr;
#endif
}

const CpuGemmBackend& cpu_gemm_named(const char* name) {
  if (!name || !*name) {
    const CpuGemmBackend* openblas = cpu_gemm_for(CpuGemm::openblas);
    return openblas ? *openblas : kEigen;
  }
  for (CpuGemm which : {CpuGemm::eigen, CpuGemm::openblas}) {
    const CpuGemmBackend* b = cpu_gemm_for(which);
    if (b && !std::strcmp(b->name, name)) return *b;
  }
  ZRT_CHECK_ARG(!std::strcmp(name, "openblas"), "ZRT_CPU_GEMM='", name,
                "' is not one of eigen, openblas");
#ifdef ZRT_WITH_OPENBLAS
  ZRT_THROW(InvalidArgument, "ZRT_CPU_GEMM=openblas: ", openblas_unavailable_reason());
#else
  ZRT_THROW(InvalidArgument,
            "ZRT_CPU_GEMM=openblas: this zrt was built without OpenBLAS (-DZRT_OPENBLAS=OFF, or "
            "OpenBLAS's pthread build not found)");
#endif
}

const CpuGemmBackend& cpu_gemm() {
  static const CpuGemmBackend& chosen = cpu_gemm_named(std::getenv("ZRT_CPU_GEMM"));
  return chosen;
}

}  // namespace zrt::kernels
