// Launch helpers shared by the runtime kernels' .cu files: a grid-stride
// element loop over a functor, so each op only writes its per-element body.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "zrt/runtime/cuda_check.h"

namespace zrt::kernels::cuda {

constexpr int kThreadsPerBlock = 256;

// Enough blocks to fill an H100 several times over; the loop strides past it.
inline unsigned grid_for(std::int64_t n) {
  std::int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, 132 * 16));
}

template <class F>
__global__ void for_each_index_kernel(std::int64_t n, F f) {
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) f(i);
}

// Runs f(i) for every i in [0, n) on `stream`.
template <class F>
void for_each_index(std::int64_t n, const F& f, cudaStream_t stream) {
  if (n <= 0) return;
  for_each_index_kernel<<<grid_for(n), kThreadsPerBlock, 0, stream>>>(n, f);
  ZRT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zrt::kernels::cuda
