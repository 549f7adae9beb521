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
  __device__ void pack(std::int64_t p) const {
    Pack<U> pd;
#pragma unroll
    for (int j = 0; j < Pack<U>::kLen; ++j) pd.v[j] = value;
    pack_at<Pack<U>::kLen>(dst, p) = pd;
  }
};

}  // namespace

void launch_fill(void* dst, DType dtype, std::int64_t n, std::uint64_t pattern, bool simple,
                 cudaStream_t stream) {
  dispatch<WordTypes>(dtype, "fill", [&](auto tag) {
    using U = typename decltype(tag)::type;
    const FillBody<U> body{static_cast<U*>(dst), static_cast<U>(pattern)};
    for_each_pack_or_index<U>(n, body, !simple && pack_aligned(dst), stream);
  });
}

}  // namespace zrt::kernels::cuda
