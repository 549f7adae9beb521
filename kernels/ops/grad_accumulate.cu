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
  __device__ void operator()(std::int64_t i) const { acc[i] = accumulate_element(acc[i], grad[i], scale); }
};

}  // namespace

void launch_accumulate_grad(float* acc, const void* grad, DType grad_dtype, std::int64_t n,
                            float scale, cudaStream_t stream) {
  dispatch<StorageFloats>(grad_dtype, "accumulate_grad", [&](auto gt) {
    using G = typename decltype(gt)::type;
    for_each_index(n, AccumulateBody<G>{acc, static_cast<const G*>(grad), scale}, stream);
  });
}

}  // namespace zrt::kernels::cuda
