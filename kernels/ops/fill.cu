#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/fill.cuh"

namespace zrt::kernels::cuda {
namespace {

template <class U>
struct FillBody {
  U* dst;
  U value;
  __device__ void operator()(std::int64_t i) const { dst[i] = value; }
};

}  // namespace

void launch_fill(void* dst, DType dtype, std::int64_t n, std::uint64_t pattern,
                 cudaStream_t stream) {
  dispatch<WordTypes>(dtype, "fill", [&](auto tag) {
    using U = typename decltype(tag)::type;
    for_each_index(n, FillBody<U>{static_cast<U*>(dst), static_cast<U>(pattern)}, stream);
  });
}

}  // namespace zrt::kernels::cuda
