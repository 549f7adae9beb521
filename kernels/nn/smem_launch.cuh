// Launching kernels with more than the default 48 KiB of dynamic shared
// memory (the tiled and flash attention kernels). .cu only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/kernels/grid.cuh"

namespace zrt::kernels::cuda {

// The most dynamic shared memory the current device grants a block.
inline int max_block_smem() {
  int device = 0, bytes = 0;
  ZRT_CUDA_CHECK(cudaGetDevice(&device));
  ZRT_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

// Launches `kernel` with `blocks` blocks of `threads` and `bytes` of dynamic
// shared memory, raising the kernel's limit past the default 48 KiB. The
// limit is the device's whole grant, the same on every call: a limit set to
// this call's size could be lowered by another host thread (another rank's)
// between its setting and this launch.
template <class Kernel, class... Args>
void launch_with_smem(Kernel kernel, std::int64_t blocks, int threads, std::int64_t bytes,
                      cudaStream_t stream, Args... args) {
  ZRT_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_block_smem()));
  kernel<<<unsigned(blocks), threads, std::size_t(bytes), stream>>>(args...);
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace zrt::kernels::cuda
