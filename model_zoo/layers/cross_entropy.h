// Fused softmax cross-entropy loss over the last dim of logits, with an
// explicit normaliser (Note [Cross-entropy normaliser] in
// kernels/nn/cross_entropy.h).
#pragma once

#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

class CrossEntropy {
 public:
  // logits: [..., V]; targets: [...] i32/i64 in [0, V), negative = ignored.
  // Returns loss [1] = Σ row losses / normaliser in f32 (f64 for f64
  // logits). Caches logits, targets and the row log-sum-exps, and id_flag
  // (null, or an id flag the forward and the backward check the targets into
  // on CUDA: Note [Device id checks] in kernels/nn/id_check.h).
  Tensor forward(const Tensor& logits, const Tensor& targets, double normaliser,
                 Stream stream = {}, const Tensor* id_flag = nullptr);
  // dlogits = (softmax - onehot) · dloss / normaliser, in the logits' dtype.
  Tensor backward(double dloss = 1.0, Stream stream = {});

 private:
  Tensor logits_, targets_, lse_;
  Tensor id_flag_;  // empty: none
  double normaliser_ = 1.0;
  bool has_cache_ = false;
};

}  // namespace zrt::model_zoo
