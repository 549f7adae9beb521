#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/grad_accumulate.cuh"
#include "zrt/kernels/ops/grad_accumulate_math.h"

namespace zrt::kernels::cuda {
namespace {

template <class G>
struct AccumulateBody {
  float* acc;
  const G* grad;
  float scale;
  static constexpr int kLen = kPackLen<float, G>;
  __device__ void operator()(std::int64_t i) const {
    acc[i] = accumulate_element(acc[i], grad[i], scale);
  }
  __device__ void pack(std::int64_t p) const {
    Pack<float, kLen> pa = pack_at<kLen>(acc, p);
    const Pack<G, kLen> pg = pack_at<kLen>(grad, p);
#pragma unroll
    for (int j = 0; j < kLen; ++j) pa.v[j] = accumulate_element(pa.v[j], pg.v[j], scale);
    pack_at<kLen>(acc, p) = pa;
  }
};

}  // namespace

void launch_accumulate_grad(float* acc, const void* grad, DType grad_dtype, std::int64_t n,
                            float scale, bool simple, cudaStream_t stream) {
  dispatch<StorageFloats>(grad_dtype, "accumulate_grad", [&](auto gt) {
    using G = typename decltype(gt)::type;
    using Body = AccumulateBody<G>;
    const Body body{acc, static_cast<const G*>(grad), scale};
    for_each_pack_of_or_index<Body::kLen>(n, body, !simple && pack_aligned(acc, grad), stream);
  });
}

}  // namespace zrt::kernels::cuda
