// ZRT_HD marks the per-element arithmetic shared by a GPU kernel and its CPU
// twin: `__host__ __device__` under nvcc, nothing under g++.
#pragma once

#ifdef __CUDACC__
#define ZRT_HD __host__ __device__
#else
#define ZRT_HD
#endif
