// The avx512 copy of the CPU kernels (Note [Kernels per instruction set]); the
// compile flags of this file select the instruction set (CMakeLists.txt).
#define ZRT_ISA avx512
#define ZRT_ISA_ENUM CpuIsa::avx512
#define ZRT_ISA_NAME "avx512"
#define Eigen zrt_eigen_avx512
#include "zrt/kernels/cpu_isa/isa_kernels_impl.h"
