#include "zrt/kernels/ops/cast.cuh"
#include "zrt/kernels/ops/cast_math.h"
#include "zrt/kernels/ops/float_storage.h"
#include "zrt/kernels/ops/launch.cuh"

namespace zrt::kernels::cuda {
namespace {

template <class D, class S>
struct CastBody {
  D* dst;
  const S* src;
  __device__ void operator()(std::int64_t i) const { dst[i] = cast_element<D>(src[i]); }
};

struct StochasticBody {
  std::uint16_t* dst;
  const float* src;
  std::uint64_t seed;
  __device__ void operator()(std::int64_t i) const {
    dst[i] = f32_to_bf16_stochastic(src[i], seed, static_cast<std::uint64_t>(i));
  }
};

}  // namespace

void launch_cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n,
                 cudaStream_t stream) {
  dispatch_float_storage(dst_dtype, "cast", [&](auto dt) {
    using D = typename decltype(dt)::type;
    dispatch_float_storage(src_dtype, "cast", [&](auto st) {
      using S = typename decltype(st)::type;
      for_each_index(n, CastBody<D, S>{static_cast<D*>(dst), static_cast<const S*>(src)}, stream);
    });
  });
}

void launch_cast_stochastic_bf16(std::uint16_t* dst, const float* src, std::int64_t n,
                                 std::uint64_t seed, cudaStream_t stream) {
  for_each_index(n, StochasticBody{dst, src, seed}, stream);
}

}  // namespace zrt::kernels::cuda
