// Warp-wide sum and max for the row kernels (one warp per row). .cu only.
#pragma once

#include <cuda_runtime.h>

namespace zrt::kernels {

template <class A>
__device__ inline A warp_sum(A v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <class A>
__device__ inline A warp_max(A v) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const A o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

}  // namespace zrt::kernels
