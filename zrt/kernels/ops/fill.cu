#include "zrt/kernels/ops/fill.cuh"
#include "zrt/kernels/ops/launch.cuh"

namespace zrt::kernels::cuda {
namespace {

template <class U>
struct FillBody {
  U* dst;
  U value;
  __device__ void operator()(std::int64_t i) const { dst[i] = value; }
};

template <class U>
void fill_as(void* dst, std::int64_t n, std::uint64_t pattern, cudaStream_t stream) {
  for_each_index(n, FillBody<U>{static_cast<U*>(dst), static_cast<U>(pattern)}, stream);
}

}  // namespace

void launch_fill(void* dst, std::int64_t n, std::size_t itemsize, std::uint64_t pattern,
                 cudaStream_t stream) {
  switch (itemsize) {
    case 1: return fill_as<std::uint8_t>(dst, n, pattern, stream);
    case 2: return fill_as<std::uint16_t>(dst, n, pattern, stream);
    case 4: return fill_as<std::uint32_t>(dst, n, pattern, stream);
    case 8: return fill_as<std::uint64_t>(dst, n, pattern, stream);
  }
  ZRT_THROW(InvalidArgument, "fill: unsupported element size ", itemsize);
}

}  // namespace zrt::kernels::cuda
