// GELU (tanh approximation) and ReLU layers. They cache their input.
#pragma once

#include "zrt/kernels/nn/activation_math.h"
#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo {

class ActivationLayer {
 public:
  explicit ActivationLayer(kernels::Activation act) : act_(act) {}
  // y = act(x), same shape and dtype. Caches x.
  Tensor forward(const Tensor& x, Stream stream = {});
  // Caches x as forward(x) would, for an activation whose output was
  // computed elsewhere (a GEMM epilogue: Linear::forward_gelu).
  void record_input(const Tensor& x);
  // dx = act'(x) · dy. Releases the cached x.
  Tensor backward(const Tensor& dy, Stream stream = {});
  // Drops the cached x without a backward (Note [Activation checkpointing]).
  void release();

 private:
  kernels::Activation act_;
  Tensor x_;
  bool has_x_ = false;
};

class Gelu : public ActivationLayer {
 public:
  Gelu() : ActivationLayer(kernels::Activation::gelu) {}
};

class Relu : public ActivationLayer {
 public:
  Relu() : ActivationLayer(kernels::Activation::relu) {}
};

}  // namespace zrt::model_zoo
