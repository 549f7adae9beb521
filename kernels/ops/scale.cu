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
};

}  // namespace

void launch_scale(void* x, DType dtype, std::int64_t n, float factor, cudaStream_t stream) {
  dispatch<StorageFloats>(dtype, "scale_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_index(n, ScaleBody<T>{static_cast<T*>(x), factor}, stream);
  });
}

}  // namespace zrt::kernels::cuda
