#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/cast.cuh"
#include "zrt/kernels/ops/cast_math.h"

namespace zrt::kernels::cuda {
namespace {

// A widening cast (bf16 -> f32) would read only 16 bytes a thread per pass
// in packs of the narrow type's word, half what a narrowing cast reads, and
// too few loads are then in flight to keep the memory busy: it reads two
// words a pass instead.
template <class D, class S>
struct CastBody {
  D* dst;
  const S* src;
  static constexpr int kLen = kPackLen<D, S> * (sizeof(S) < sizeof(D) ? 2 : 1);
  __device__ void operator()(std::int64_t i) const { dst[i] = cast_element<D>(src[i]); }
  __device__ void pack(std::int64_t p) const {
    const Pack<S, kLen> ps = pack_at<kLen>(src, p);
    Pack<D, kLen> pd;
#pragma unroll
    for (int j = 0; j < kLen; ++j) pd.v[j] = cast_element<D>(ps.v[j]);
    pack_at<kLen>(dst, p) = pd;
  }
};

struct StochasticBody {
  std::uint16_t* dst;
  const float* src;
  std::uint64_t seed;
  __device__ void operator()(std::int64_t i) const {
    dst[i] = f32_to_bf16_stochastic(src[i], seed, static_cast<std::uint64_t>(i));
  }
  static constexpr int kLen = kPackLen<std::uint16_t, float>;
  __device__ void pack(std::int64_t p) const {
    const Pack<float, kLen> ps = pack_at<kLen>(src, p);
    Pack<std::uint16_t, kLen> pd;
#pragma unroll
    for (int j = 0; j < kLen; ++j)
      pd.v[j] = f32_to_bf16_stochastic(ps.v[j], seed, static_cast<std::uint64_t>(p * kLen + j));
    pack_at<kLen>(dst, p) = pd;
  }
};

}  // namespace

void launch_cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n,
                 bool simple, cudaStream_t stream) {
  dispatch<StorageFloats>(dst_dtype, "cast", [&](auto dt) {
    using D = typename decltype(dt)::type;
    dispatch<StorageFloats>(src_dtype, "cast", [&](auto st) {
      using S = typename decltype(st)::type;
      using Body = CastBody<D, S>;
      const Body body{static_cast<D*>(dst), static_cast<const S*>(src)};
      for_each_pack_of_or_index<Body::kLen>(n, body, !simple && pack_aligned(dst, src), stream);
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
                                 std::uint64_t seed, bool simple, cudaStream_t stream) {
  const StochasticBody body{dst, src, seed};
  for_each_pack_of_or_index<StochasticBody::kLen>(n, body, !simple && pack_aligned(dst, src),
                                                  stream);
}

void launch_copy(void* dst, const void* src, std::size_t nbytes, cudaStream_t stream) {
  ZRT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace zrt::kernels::cuda
