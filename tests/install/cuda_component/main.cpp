// zrt's headers with their CUDA sections open, and CUDA's runtime called
// directly: what zrt::cuda gives a consumer.
#include <cstdio>

#include "zrt/kernels/launch.h"

#ifndef ZRT_WITH_CUDA
#error "zrt::cuda did not define ZRT_WITH_CUDA"
#endif

int main() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  std::printf("CUDA devices: %d (%s)\n", status == cudaSuccess ? devices : 0,
              cudaGetErrorName(status));
  return 0;
}
