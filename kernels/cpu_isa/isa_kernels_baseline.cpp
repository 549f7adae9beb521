// The baseline copy of the CPU kernels (Note [Kernels per instruction set]); the
// compile flags of this file select the instruction set (CMakeLists.txt).
#define ZRT_ISA baseline
#define ZRT_ISA_ENUM CpuIsa::baseline
#define ZRT_ISA_NAME "baseline"
#define Eigen zrt_eigen_baseline
#include "zrt/kernels/cpu_isa/isa_kernels_impl.h"
