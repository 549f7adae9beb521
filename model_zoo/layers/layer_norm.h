// LayerNorm over the last dim with affine weight and bias (torch.nn.LayerNorm).
#pragma once

#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

class LayerNorm {
 public:
  // weight, bias: [C]. See Note [Layers own no parameters].
  LayerNorm(Param weight, Param bias, double eps = 1e-5);

  // x: [..., C] -> y, same shape and dtype. Caches x, mean and rstd.
  Tensor forward(const Tensor& x, Stream stream = {});
  // dy -> dx; weight and bias gradients written or accumulated per `mode`.
  Tensor backward(const Tensor& dy, GradMode mode, Stream stream = {});
  // Drops the cache without a backward (Note [Activation checkpointing]).
  void release();

 private:
  Param weight_, bias_;
  double eps_;
  Tensor x_, mean_, rstd_;
  bool has_x_ = false;
};

}  // namespace zrt::model_zoo
