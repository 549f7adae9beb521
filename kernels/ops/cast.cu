#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/cast.cuh"
#include "zrt/kernels/ops/cast_math.h"

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
  dispatch<StorageFloats>(dst_dtype, "cast", [&](auto dt) {
    using D = typename decltype(dt)::type;
    dispatch<StorageFloats>(src_dtype, "cast", [&](auto st) {
      using S = typename decltype(st)::type;
      for_each_index(n, CastBody<D, S>{static_cast<D*>(dst), static_cast<const S*>(src)}, stream);
    });
  });
}

namespace {
struct WidenBody {
  double* dst;
  const float* src;
  __device__ void operator()(std::int64_t i) const { dst[i] = static_cast<double>(src[i]); }
};
}  // namespace

void launch_widen_f32_to_f64(double* dst, const float* src, std::int64_t n, cudaStream_t stream) {
  for_each_index(n, WidenBody{dst, src}, stream);
}

void launch_cast_stochastic_bf16(std::uint16_t* dst, const float* src, std::int64_t n,
                                 std::uint64_t seed, cudaStream_t stream) {
  for_each_index(n, StochasticBody{dst, src, seed}, stream);
}

void launch_copy(void* dst, const void* src, std::size_t nbytes, cudaStream_t stream) {
  ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace zrt::kernels::cuda
