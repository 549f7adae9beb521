// The kernels' launch shapes, for .cu files: a thread per index over a
// grid-stride loop, or a warp per row. An op writes only the body, a functor
// with a __device__ operator(); grid sizing and the launch check live here.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "zrt/runtime/cuda_check.h"

// Checks the launch just issued, naming the caller's file and line.
#define ZRT_CUDA_CHECK_LAUNCH() ZRT_CUDA_CHECK(cudaGetLastError())

namespace zrt::kernels::cuda {

constexpr int kThreadsPerBlock = 256;
constexpr int kWarpSize = 32;
constexpr int kWarpsPerBlock = kThreadsPerBlock / kWarpSize;

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
  ZRT_CUDA_CHECK_LAUNCH();
}

template <class F>
__global__ void for_each_warp_row_kernel(std::int64_t rows, F f) {
  const std::int64_t stride = std::int64_t(gridDim.x) * kWarpsPerBlock;
  // A warp's lanes share each row and step together, so f may use full-warp
  // shuffles (warp_reduce.cuh).
  for (std::int64_t row = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize; row < rows;
       row += stride)
    f(row, int(threadIdx.x % kWarpSize));
}

// Runs f(row, lane) for every row in [0, rows) on `stream`, one warp per row
// and lane in [0, kWarpSize); the grid is capped as grid_for's and the warps
// stride over the rows beyond it.
template <class F>
void for_each_warp_row(std::int64_t rows, const F& f, cudaStream_t stream) {
  if (rows <= 0) return;
  for_each_warp_row_kernel<<<grid_for(rows * kWarpSize), kThreadsPerBlock, 0, stream>>>(rows, f);
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace zrt::kernels::cuda
