// GPT-style causal multi-head self-attention block: a fused qkv Linear
// (C -> 3C, q | k | v), causal softmax attention per head, and the output
// projection Linear (C -> C).
#pragma once

#include <optional>

#include "zrt/model_zoo/layers/linear.h"

namespace zrt::model_zoo {

class CausalSelfAttention {
 public:
  // qkv_weight: [3C, C] (out_in) or [C, 3C] (in_out); proj_weight: [C, C];
  // biases [3C] and [C] or none. C must divide by n_head.
  CausalSelfAttention(Param qkv_weight, std::optional<Param> qkv_bias, Param proj_weight,
                      std::optional<Param> proj_bias, std::int64_t n_head,
                      WeightLayout layout = WeightLayout::out_in);

  // x: [B, T, C] -> [B, T, C]. Caches qkv, the attention output and its lse.
  Tensor forward(const Tensor& x, Stream stream = {});
  // dy: [B, T, C] -> dx; parameter gradients written or accumulated per `mode`.
  Tensor backward(const Tensor& dy, GradMode mode, Stream stream = {});
  // Drops every cache without a backward (Note [Activation checkpointing]).
  void release();

 private:
  Linear qkv_, proj_;
  std::int64_t n_head_;
  Tensor qkv_out_, att_out_, lse_;
  bool has_cache_ = false;
};

}  // namespace zrt::model_zoo
