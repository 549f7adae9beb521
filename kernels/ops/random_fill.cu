#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/random_fill.cuh"

namespace zrt::kernels::cuda {
namespace {

struct RandomFillBody {
  float* dst;
  RandomInit dist;
  std::uint64_t seed, stream;
  std::int64_t first;
  __device__ void operator()(std::int64_t i) const {
    dst[i] = random_init_element(dist, seed, stream, static_cast<std::uint64_t>(first + i));
  }
};

}  // namespace

void launch_random_fill(float* dst, std::int64_t n, RandomInit dist, std::uint64_t seed,
                        std::uint64_t stream, std::int64_t first_index, cudaStream_t s) {
  for_each_index(n, RandomFillBody{dst, dist, seed, stream, first_index}, s);
}

}  // namespace zrt::kernels::cuda
