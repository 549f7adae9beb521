#include "zrt/kernels/dispatch.h"
#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/ops/scale.cuh"
#include "zrt/kernels/ops/scale_math.h"

namespace zrt::kernels::cuda {
namespace {

template <class T>
struct ScaleBody {
  T* x;
  float factor;
  __device__ void operator()(std::int64_t i) const { x[i] = scale_element(x[i], factor); }
  __device__ void pack(std::int64_t p) const {
    Pack<T> px = pack_at<Pack<T>::kLen>(x, p);
#pragma unroll
    for (int j = 0; j < Pack<T>::kLen; ++j) px.v[j] = scale_element(px.v[j], factor);
    pack_at<Pack<T>::kLen>(x, p) = px;
  }
};

}  // namespace

void launch_scale(void* x, DType dtype, std::int64_t n, float factor, bool simple,
                  cudaStream_t stream) {
  dispatch<StorageFloats>(dtype, "scale_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ScaleBody<T> body{static_cast<T*>(x), factor};
    for_each_pack_or_index<T>(n, body, !simple && pack_aligned(x), stream);
  });
}

}  // namespace zrt::kernels::cuda
