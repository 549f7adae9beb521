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
  __device__ void pack(std::int64_t p) const {
    using A = acc_t<T>;
    const Pack<T> pa = reinterpret_cast<const Pack<T>*>(a)[p],
                  pb = reinterpret_cast<const Pack<T>*>(b)[p];
    Pack<T> po;
#pragma unroll
    for (int j = 0; j < Pack<T>::kLen; ++j) po.v[j] = store<T>(load<A>(pa.v[j]) + load<A>(pb.v[j]));
    reinterpret_cast<Pack<T>*>(out)[p] = po;
  }
};

}  // namespace

void launch_residual_add(DType dtype, std::int64_t n, const void* a, const void* b, void* out,
                         bool simple, cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "residual_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const ResidualAddBody<T> body{static_cast<const T*>(a), static_cast<const T*>(b),
                                  static_cast<T*>(out)};
    for_each_pack_or_index<T>(n, body, !simple && pack_aligned(a, b, out), stream);
  });
}

}  // namespace zrt::kernels::cuda
