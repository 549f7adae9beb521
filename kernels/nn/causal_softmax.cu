#include "zrt/kernels/grid.cuh"
#include "zrt/kernels/nn/causal_softmax.cuh"
#include "zrt/kernels/nn/causal_softmax_math.h"
#include "zrt/kernels/nn/warp_reduce.cuh"

namespace zrt::kernels::cuda {
namespace {

// The warp's partials merged by an xor butterfly; every lane gets the row's.
template <class A>
__device__ SoftmaxPartial<A> warp_softmax_merge(SoftmaxPartial<A> p) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const SoftmaxPartial<A> o{__shfl_xor_sync(0xffffffffu, p.m, offset),
                              __shfl_xor_sync(0xffffffffu, p.l, offset)};
    p = softmax_merge(p, o);
  }
  return p;
}

// A warp per row, lanes striding over its keys, as the CPU twin's row in
// another summation order.
template <class T>
struct CausalSoftmaxForwardRow {
  using A = acc_t<T>;
  std::int64_t seq;
  const A* scores;
  T* probs;
  A* lse;
  __device__ void operator()(std::int64_t r, int lane) const {
    const A* s = scores + r * seq;
    const std::int64_t keys = causal_row_keys(r, seq);
    SoftmaxPartial<A> part;
    for (std::int64_t j = lane; j < keys; j += kWarpSize) part = softmax_add(part, s[j]);
    const A row_lse = softmax_lse(warp_softmax_merge(part));
    T* p = probs + r * seq;
    for (std::int64_t j = lane; j < seq; j += kWarpSize)
      p[j] = store<T>(j < keys ? causal_prob(s[j], row_lse) : A(0));
    if (lane == 0) lse[r] = row_lse;
  }
};

template <class T>
struct CausalSoftmaxRecomputeRow {
  using A = acc_t<T>;
  std::int64_t seq;
  const A* scores;
  const A* lse;
  T* probs;
  __device__ void operator()(std::int64_t r, int lane) const {
    const A* s = scores + r * seq;
    const std::int64_t keys = causal_row_keys(r, seq);
    const A row_lse = lse[r];
    T* p = probs + r * seq;
    for (std::int64_t j = lane; j < seq; j += kWarpSize)
      p[j] = store<T>(j < keys ? causal_prob(s[j], row_lse) : A(0));
  }
};

template <class T>
struct CausalSoftmaxBackwardRow {
  using A = acc_t<T>;
  std::int64_t seq;
  const T* probs;
  const A* dprobs;
  T* dscores;
  __device__ void operator()(std::int64_t r, int lane) const {
    const T* p = probs + r * seq;
    const A* dp = dprobs + r * seq;
    const std::int64_t keys = causal_row_keys(r, seq);
    A dot = 0;
    for (std::int64_t j = lane; j < keys; j += kWarpSize) dot += load<A>(p[j]) * dp[j];
    dot = warp_sum(dot);
    // Every lane has read its p before any writes ds (warp_sum's shuffles
    // synchronise the warp), so ds may be p.
    T* ds = dscores + r * seq;
    for (std::int64_t j = lane; j < seq; j += kWarpSize)
      ds[j] = store<T>(j < keys ? causal_dscore(load<A>(p[j]), dp[j], dot) : A(0));
  }
};

}  // namespace

void launch_causal_softmax_forward(DType dtype, std::int64_t rows, std::int64_t seq,
                                   const void* scores, void* probs, void* lse,
                                   cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "causal_softmax_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    for_each_warp_row(rows,
                      CausalSoftmaxForwardRow<T>{seq, static_cast<const A*>(scores),
                                                 static_cast<T*>(probs), static_cast<A*>(lse)},
                      stream);
  });
}

void launch_causal_softmax_recompute(DType dtype, std::int64_t rows, std::int64_t seq,
                                     const void* scores, const void* lse, void* probs,
                                     cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "causal_softmax_recompute", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    for_each_warp_row(
        rows,
        CausalSoftmaxRecomputeRow<T>{seq, static_cast<const A*>(scores), static_cast<const A*>(lse),
                                     static_cast<T*>(probs)},
        stream);
  });
}

void launch_causal_softmax_backward(DType dtype, std::int64_t rows, std::int64_t seq,
                                    const void* probs, const void* dprobs, void* dscores,
                                    cudaStream_t stream) {
  dispatch<NnFloats>(dtype, "causal_softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    for_each_warp_row(
        rows,
        CausalSoftmaxBackwardRow<T>{seq, static_cast<const T*>(probs),
                                    static_cast<const A*>(dprobs), static_cast<T*>(dscores)},
        stream);
  });
}

}  // namespace zrt::kernels::cuda
