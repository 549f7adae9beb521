#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/element.h"
#include "zrt/kernels/nn/residual_add.cuh"

namespace zrt::kernels::cuda {
namespace {

template <class T>
struct ResidualAddBody {
  const T* a;
  const T* b;
  T* out;
  __device__ void operator()(std::int64_t i) const {
    using A = acc_t<T>;
    out[i] = store<T>(load<A>(a[i]) + load<A>(b[i]));
  }
};

}  // namespace

void launch_residual_add(DType dtype, std::int64_t n, const void* a, const void* b, void* out,
                         cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "residual_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_index(n,
                   ResidualAddBody<T>{static_cast<const T*>(a), static_cast<const T*>(b),
                                      static_cast<T*>(out)},
                   stream);
  });
}

}  // namespace zrt::kernels::cuda
