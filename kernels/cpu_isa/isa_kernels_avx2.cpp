// The avx2 copy of the CPU kernels (Note [Kernels per instruction set]); the
// compile flags of this file select the instruction set (CMakeLists.txt).
#define ZRT_ISA avx2
#define ZRT_ISA_ENUM CpuIsa::avx2
#define ZRT_ISA_NAME "avx2"
#define Eigen zrt_eigen_avx2
#include "zrt/kernels/cpu_isa/isa_kernels_impl.h"
