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

// A launcher's pointer, cast to the typed pointer of the row member it
// initialises (constness kept).
template <class V>
struct TypedAs {
  V* p;
  template <class U>
  operator U*() const {
    return static_cast<U*>(p);
  }
};

// Row<T>{seq, pointers...} a warp per row, T the element type of dtype.
template <template <class> class Row, class... V>
void launch_rows(DType dtype, const char* op, std::int64_t rows, std::int64_t seq,
                 cudaStream_t stream, V*... pointers) {
  dispatch<NnFloats>(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_warp_row(rows, Row<T>{seq, TypedAs<V>{pointers}...}, stream);
  });
}

}  // namespace

void launch_causal_softmax_forward(DType dtype, std::int64_t rows, std::int64_t seq,
                                   const void* scores, void* probs, void* lse,
                                   cudaStream_t stream) {
  launch_rows<CausalSoftmaxForwardRow>(dtype, "causal_softmax_forward", rows, seq, stream, scores,
                                       probs, lse);
}

void launch_causal_softmax_recompute(DType dtype, std::int64_t rows, std::int64_t seq,
                                     const void* scores, const void* lse, void* probs,
                                     cudaStream_t stream) {
  launch_rows<CausalSoftmaxRecomputeRow>(dtype, "causal_softmax_recompute", rows, seq, stream,
                                         scores, lse, probs);
}

void launch_causal_softmax_backward(DType dtype, std::int64_t rows, std::int64_t seq,
                                    const void* probs, const void* dprobs, void* dscores,
                                    cudaStream_t stream) {
  launch_rows<CausalSoftmaxBackwardRow>(dtype, "causal_softmax_backward", rows, seq, stream, probs,
                                        dprobs, dscores);
}

}  // namespace zrt::kernels::cuda
