// Warp-wide sum and max for the row kernels (one warp per row), and a
// block-wide sum in the order of Note [Deterministic block sums]. .cu only.
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

// Σ v over a block of kThreads threads (a multiple of 32, at most 1024):
// each warp's xor butterfly, then warp 0's over the warps' sums. The result
// is valid in warp 0 (every lane of it). Every thread of the block must call
// it (it synchronises the block, also before returning, so that a second
// call does not overwrite the warps' sums while warp 0 still reads them).
template <class A, int kThreads>
__device__ inline A block_sum(A v) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024);
  constexpr int kWarps = kThreads / 32;
  __shared__ A warp_part[kWarps];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  v = warp_sum(v);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) v = warp_sum(lane < kWarps ? warp_part[lane] : A(0));
  __syncthreads();
  return v;
}

}  // namespace zrt::kernels
