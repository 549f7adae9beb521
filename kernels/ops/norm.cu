#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/norm.cuh"
#include "zrt/kernels/ops/norm_math.h"

namespace zrt::kernels::cuda {
namespace {

static_assert(kNormLanes == kThreadsPerBlock);

// The halving tree of Note [Deterministic norm] over shared memory.
template <class A>
__device__ void tree_reduce(A* lanes) {
  for (int s = kNormLanes / 2; s > 0; s /= 2) {
    __syncthreads();
    if (int(threadIdx.x) < s) lanes[threadIdx.x] = lanes[threadIdx.x] + lanes[threadIdx.x + s];
  }
  __syncthreads();
}

// One CUDA block per norm block: writes its sum of squares and of x - x.
template <class T>
__global__ void norm_blocks_kernel(const T* x, std::int64_t n, float* partials) {
  __shared__ float sq[kNormLanes];
  __shared__ float nf[kNormLanes];
  float s = 0.0f, f = 0.0f;
  norm_lane(x, std::int64_t(blockIdx.x) * kNormBlock, n, int(threadIdx.x), s, f);
  sq[threadIdx.x] = s;
  nf[threadIdx.x] = f;
  tree_reduce(sq);
  tree_reduce(nf);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sq[0];
    partials[2 * blockIdx.x + 1] = nf[0];
  }
}

// One block: lane j sums block results j, j + 256, ... in f64, then the tree.
__global__ void norm_final_kernel(const float* partials, std::int64_t blocks, double* result, bool flag_non_finite) {
  __shared__ double sq[kNormLanes];
  __shared__ double nf[kNormLanes];
  double s = 0.0, f = 0.0;
  for (std::int64_t b = threadIdx.x; b < blocks; b += kNormLanes) {
    s = s + double(partials[2 * b]);
    f = f + double(partials[2 * b + 1]);
  }
  sq[threadIdx.x] = s;
  nf[threadIdx.x] = f;
  tree_reduce(sq);
  tree_reduce(nf);
  if (threadIdx.x == 0) {
    result[0] = sq[0];
    result[1] = flag_non_finite ? (isnan(nf[0]) ? 1.0 : 0.0) : nf[0];
  }
}

}  // namespace

void launch_squared_norm(const void* x, DType dtype, std::int64_t n, float* block_partials,
                         double* result_device, bool flag_non_finite, cudaStream_t stream) {
  const std::int64_t blocks = norm_blocks(n);
  dispatch<StorageFloats>(dtype, "squared_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (blocks > 0) {
      norm_blocks_kernel<<<unsigned(blocks), kNormLanes, 0, stream>>>(static_cast<const T*>(x), n,
                                                                      block_partials);
      ZRT_CUDA_CHECK_LAUNCH();
    }
  });
  norm_final_kernel<<<1, kNormLanes, 0, stream>>>(block_partials, blocks, result_device, flag_non_finite);
  ZRT_CUDA_CHECK_LAUNCH();
}

}  // namespace zrt::kernels::cuda
