#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/cross_entropy.cuh"
#include "zrt/kernels/nn/cross_entropy_math.h"
#include "zrt/kernels/nn/warp_reduce.cuh"

namespace zrt::kernels::cuda {
namespace {

// A warp per row: max, then Σ exp(x - max), then the row's loss.
template <class T, class I>
struct CrossEntropyRow {
  using A = acc_t<T>;
  std::int64_t vocab;
  const T* logits;
  const I* targets;
  A* losses;
  A* lse;
  __device__ void operator()(std::int64_t row, int lane) const {
    const T* x = logits + row * vocab;
    A m = load<A>(x[0]);
    for (std::int64_t i = lane; i < vocab; i += kWarpSize) m = max(m, load<A>(x[i]));
    m = warp_max(m);
    A s = 0;
    for (std::int64_t i = lane; i < vocab; i += kWarpSize) s += exp_(load<A>(x[i]) - m);
    const A row_lse = m + log_(warp_sum(s));
    if (lane == 0) {
      const std::int64_t t = static_cast<std::int64_t>(targets[row]);
      lse[row] = row_lse;
      losses[row] = t < 0 ? A(0) : row_lse - load<A>(x[t]);
    }
  }
};

// The mean in row order on one thread, so it is bit-identical to the CPU's.
template <class A>
__global__ void cross_entropy_sum_kernel(std::int64_t rows, const A* losses, A normaliser,
                                         A* loss) {
  A s = 0;
  for (std::int64_t r = 0; r < rows; ++r) s += losses[r];
  *loss = s / normaliser;
}

template <class T, class I>
struct CrossEntropyBackwardBody {
  using A = acc_t<T>;
  std::int64_t vocab;
  const T* logits;
  const I* targets;
  const A* lse;
  A scale;
  T* dlogits;
  __device__ void operator()(std::int64_t idx) const {
    const std::int64_t r = idx / vocab, i = idx % vocab;
    const std::int64_t t = static_cast<std::int64_t>(targets[r]);
    dlogits[idx] = t < 0 ? store<T>(A(0))
                         : store<T>(cross_entropy_dlogit(load<A>(logits[idx]), lse[r], i == t,
                                                         scale));
  }
};

}  // namespace

void launch_cross_entropy_forward(DType dtype, std::int64_t rows, std::int64_t vocab,
                                  const void* logits, const void* targets, DType targets_dtype,
                                  double normaliser, void* losses, void* lse, void* loss,
                                  cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "cross_entropy_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    dispatch<IdTypes>(targets_dtype, "cross_entropy_forward", [&](auto id_tag) {
      using I = typename decltype(id_tag)::type;
      for_each_warp_row(rows,
                        CrossEntropyRow<T, I>{vocab, static_cast<const T*>(logits),
                                              static_cast<const I*>(targets),
                                              static_cast<A*>(losses), static_cast<A*>(lse)},
                        stream);
    });
    cross_entropy_sum_kernel<A><<<1, 1, 0, stream>>>(rows, static_cast<const A*>(losses),
                                                     A(normaliser), static_cast<A*>(loss));
    ZRT_CUDA_CHECK_LAUNCH();
  });
}

void launch_cross_entropy_backward(DType dtype, std::int64_t rows, std::int64_t vocab,
                                   const void* logits, const void* targets, DType targets_dtype,
                                   const void* lse, double scale, void* dlogits,
                                   cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    dispatch<IdTypes>(targets_dtype, "cross_entropy_backward", [&](auto id_tag) {
      using I = typename decltype(id_tag)::type;
      for_each_index(rows * vocab,
                     CrossEntropyBackwardBody<T, I>{vocab, static_cast<const T*>(logits),
                                                    static_cast<const I*>(targets),
                                                    static_cast<const A*>(lse), A(scale),
                                                    static_cast<T*>(dlogits)},
                     stream);
    });
  });
}

}  // namespace zrt::kernels::cuda
