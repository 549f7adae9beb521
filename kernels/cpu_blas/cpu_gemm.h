// The CPU GEMM backend of nn/gemm: OpenBLAS where zrt was built with it,
// else Eigen through the instruction-set copies (cpu_isa/).
//
// Note [CPU GEMM backends]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// On the GPT shapes (zrt-bench gemm --gemm), Debian's OpenBLAS 0.3.21 runs
// the fp32 GEMMs about 1.2x as fast as Eigen's AVX2 kernels (65.4 against
// 54.6 GFLOP/s in one run, docs/cpu-kernels.md), so it is the default where
// it is found at build time (-DZRT_OPENBLAS=AUTO|ON|OFF);
// Eigen stays as the fallback and for every other kernel. zrt splits a GEMM's
// rows over its own per-rank workers (Note [Kernel threads per rank]), so
// OpenBLAS must run each call on the calling thread and be safe to call from
// several threads at once. Debian's serial build is not (its buffer pool is
// unlocked: concurrent calls return wrong results), so zrt loads the pthread
// build and sets its thread count to 1 (process-wide, once) before the first
// call (Note [OpenBLAS loaded on first use] in openblas_gemm.cpp); if the
// library loaded turns out to be a single-threaded build anyway, OpenBLAS is
// not used. ZRT_CPU_GEMM=eigen|openblas in the environment picks a backend
// (an unknown or unavailable name is an error, with the reason).
#pragma once

#include <cstdint>

#include "zrt/kernels/cpu_isa/isa_kernels.h"

namespace zrt::kernels {

enum class CpuGemm : std::uint8_t { eigen, openblas };

struct CpuGemmBackend {
  CpuGemm which;
  const char* name;
  void (*f32)(const GemmCall<float>&);
  void (*f64)(const GemmCall<double>&);
  template <class T>
  auto function() const {
    if constexpr (sizeof(T) == 4)
      return f32;
    else
      return f64;
  }
};

// The backend nn/gemm uses: ZRT_CPU_GEMM's, else OpenBLAS when available,
// else Eigen; chosen on first use. A program calls it before starting
// threads: loading OpenBLAS sets an environment variable for a moment.
const CpuGemmBackend& cpu_gemm();
// The backend of that name ("" or null: the default), throwing
// InvalidArgument for an unknown name or one not available here.
const CpuGemmBackend& cpu_gemm_named(const char* name);
// A backend if this build has it and it is safe to use, else nullptr.
const CpuGemmBackend* cpu_gemm_for(CpuGemm which);

}  // namespace zrt::kernels
