#include "zrt/kernels/nn/causal_softmax.h"

#include <algorithm>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/causal_softmax_math.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/causal_softmax.cuh"
#endif

namespace zrt::kernels {
namespace {

// The shape [pairs, T, T] both square tensors share, checked; returns T.
std::int64_t square_rows(const char* op, const Tensor& wide, const Tensor& narrow) {
  check_nn_floats(op, {narrow});
  check_dtype(op, wide, acc_dtype(narrow.dtype()));
  ZRT_CHECK_ARG(wide.dim() == 3 && wide.size(1) == wide.size(2), op, ": ", wide.str(),
                " must be [pairs, T, T]");
  ZRT_CHECK_ARG(narrow.shape() == wide.shape(), op, ": ", narrow.str(), " must match ", wide.str());
  return wide.size(1);
}

void check_lse(const char* op, const Tensor& lse, const Tensor& scores) {
  check_dtype(op, lse, scores.dtype());
  check_numel(op, lse, scores.size(0) * scores.size(1));
}

// Runs row(r) over every row of [pairs, T, T] on the CPU's threads.
template <class Row>
void for_rows(std::int64_t rows, std::int64_t seq, const Row& row) {
  parallel_for(rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(seq, 1)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t r = lo; r < hi; ++r) row(r);
               });
}

}  // namespace

void causal_softmax_forward(const Tensor& scores, const Tensor& probs, const Tensor& lse,
                            Stream stream) {
  constexpr const char* op = "causal_softmax_forward";
  const std::int64_t seq = square_rows(op, scores, probs);
  check_lse(op, lse, scores);
  if (scores.numel() == 0) return;
  check_operands(op, {scores, probs, lse}, stream);
  const std::int64_t rows = scores.size(0) * seq;
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, scores.device(),
      cuda::launch_causal_softmax_forward(probs.dtype(), rows, seq, scores.data_ptr(),
                                          probs.data_ptr(), lse.data_ptr(), cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& scores, const Tensor& probs, const Tensor& lse) {
        dispatch<NnFloats>(probs.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const A* s = scores.data<A>();
          T* p = probs.data<T>();
          A* l = lse.data<A>();
          for_rows(rows, seq, [&](std::int64_t r) { causal_softmax_forward_row(r, seq, s, p, l); });
        });
      },
      scores, probs, lse);
}

void causal_softmax_recompute(const Tensor& scores, const Tensor& lse, const Tensor& probs,
                              Stream stream) {
  constexpr const char* op = "causal_softmax_recompute";
  const std::int64_t seq = square_rows(op, scores, probs);
  check_lse(op, lse, scores);
  if (scores.numel() == 0) return;
  check_operands(op, {scores, lse, probs}, stream);
  const std::int64_t rows = scores.size(0) * seq;
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, scores.device(),
      cuda::launch_causal_softmax_recompute(probs.dtype(), rows, seq, scores.data_ptr(),
                                            lse.data_ptr(), probs.data_ptr(), cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& scores, const Tensor& lse, const Tensor& probs) {
        dispatch<NnFloats>(probs.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const A* s = scores.data<A>();
          const A* l = lse.data<A>();
          T* p = probs.data<T>();
          for_rows(rows, seq,
                   [&](std::int64_t r) { causal_softmax_recompute_row(r, seq, s, l, p); });
        });
      },
      scores, lse, probs);
}

void causal_softmax_backward(const Tensor& probs, const Tensor& dprobs, const Tensor& dscores,
                             Stream stream) {
  constexpr const char* op = "causal_softmax_backward";
  const std::int64_t seq = square_rows(op, dprobs, probs);
  check_nn_floats(op, {probs, dscores});
  ZRT_CHECK_ARG(dscores.shape() == probs.shape(), op, ": ", dscores.str(), " must match ",
                probs.str());
  if (probs.numel() == 0) return;
  check_operands(op, {probs, dprobs, dscores}, stream);
  const std::int64_t rows = probs.size(0) * seq;
  ZRT_CUDA_LAUNCH_AND_RETURN(op, probs.device(),
                             cuda::launch_causal_softmax_backward(
                                 probs.dtype(), rows, seq, probs.data_ptr(), dprobs.data_ptr(),
                                 dscores.data_ptr(), cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& probs, const Tensor& dprobs, const Tensor& dscores) {
        dispatch<NnFloats>(probs.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const T* p = probs.data<T>();
          const A* dp = dprobs.data<A>();
          T* ds = dscores.data<T>();
          for_rows(rows, seq,
                   [&](std::int64_t r) { causal_softmax_backward_row(r, seq, p, dp, ds); });
        });
      },
      probs, dprobs, dscores);
}

}  // namespace zrt::kernels
