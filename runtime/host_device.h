// ZRT_HD marks inline functions that CUDA device code calls as well as host
// code: `__host__ __device__` under nvcc, nothing under g++. The runtime's
// 16-bit conversions (float16.h) use it; the kernels' per-element arithmetic
// uses it through zrt/kernels/hd.h (Note [Two precision rules]).
#pragma once

#ifdef __CUDACC__
#define ZRT_HD __host__ __device__
#else
#define ZRT_HD
#endif
