// Softmax cross-entropy loss over the last dim of logits, with an explicit
// normaliser (Note [Cross-entropy normaliser] in kernels/nn/cross_entropy.h),
// the logits' gradient taken in the same pass (Note [Fused classifier]).
#pragma once

#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

class CrossEntropy {
 public:
  // vocab: the classes, the logits' first columns (0: all of them; the rest
  // are padding: Note [Padded vocabulary] in models/gpt.h). in_place: the
  // forward overwrites its logits with their gradient, for a caller that
  // reads them no more (a model's loss stage): no second buffer of their size.
  explicit CrossEntropy(std::int64_t vocab = 0, bool in_place = false);

  // logits: [..., V]; targets: [...] i32/i64 in [0, vocab), negative =
  // ignored. Returns loss [1] = Σ row losses / normaliser in f32 (f64 for f64
  // logits), and keeps the logits' gradient for `dloss` (finite, not 0), the
  // dloss the backward is expected to pass. id_flag: null, or an id flag the
  // targets are checked into on CUDA (Note [Device id checks] in
  // kernels/nn/id_check.h).
  Tensor forward(const Tensor& logits, const Tensor& targets, double normaliser, Stream stream = {},
                 const Tensor* id_flag = nullptr, double dloss = 1.0);
  // dlogits = (softmax - onehot) · dloss / normaliser, in the logits' dtype:
  // the forward's gradient (the logits themselves when in place). A dloss
  // other than the forward's takes the pass again (the logits are kept for
  // it), or in place, where they are gone, is InvalidArgument.
  Tensor backward(double dloss = 1.0, Stream stream = {});

 private:
  std::int64_t vocab_;
  bool in_place_;
  Tensor dlogits_;
  Tensor logits_, targets_, id_flag_;  // not in place: for another dloss
  double normaliser_ = 1.0;
  double dloss_ = 1.0;
  bool has_cache_ = false;
};

}  // namespace zrt::model_zoo
