// Linear layer y = x·Wᵀ + b (torch.nn.Linear layout, weight [out, in]) or
// y = x·W + b (GPT-2 Conv1D layout of Hugging Face checkpoints, weight
// [in, out]). All three GEMMs read the weight in place, either layout.
#pragma once

#include <optional>

#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

enum class WeightLayout {
  out_in,  // weight [out, in], as torch.nn.Linear
  in_out,  // weight [in, out], as GPT-2's Conv1D
};

class Linear {
 public:
  // weight: 2-D per `layout`; bias: [out] or none. See Note [Layers own no parameters].
  Linear(Param weight, std::optional<Param> bias, WeightLayout layout = WeightLayout::out_in);

  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

  // x: [..., in] in the weight's dtype and device -> y: [..., out]. Caches x.
  // The bias is added in the GEMM's epilogue where it can be (Note [GEMM
  // epilogues]).
  Tensor forward(const Tensor& x, Stream stream = {});
  // The forward followed by GELU: pre = forward(x) and out = gelu(pre), in one
  // cuBLASLt GEMM where it can be (Note [GEMM epilogues]). Caches x as
  // forward does; the GELU layer that follows keeps pre for its backward
  // (ActivationLayer::record_input).
  struct GeluOutput {
    Tensor pre, out;
  };
  GeluOutput forward_gelu(const Tensor& x, Stream stream = {});
  // dy: [..., out] -> dx: [..., in]; the weight (and bias) gradients are
  // written or accumulated per `mode`. Releases the cached x.
  Tensor backward(const Tensor& dy, GradMode mode, Stream stream = {});
  // Drops the cached x without a backward (activation checkpointing runs
  // forward again before backward; Note [Activation checkpointing]).
  void release();

 private:
  // n ones (bias broadcast and bias gradient as GEMMs), on `like`'s device
  // and allocator, written on `stream`.
  Tensor ones(const Tensor& like, std::int64_t n, Stream stream);

  Param weight_;
  std::optional<Param> bias_;
  WeightLayout layout_;
  std::int64_t in_ = 0, out_ = 0;
  Tensor x_;
  bool has_x_ = false;
  Tensor ones_;
};

}  // namespace zrt::model_zoo
