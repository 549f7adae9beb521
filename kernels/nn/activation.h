// Elementwise activations (GELU tanh approximation, ReLU) with their
// backward, on any floating dtype and device.
#pragma once

#include "zrt/kernels/nn/activation_math.h"
#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// y = act(x). x and y have the same dtype, device and numel; y may be x.
void activation_forward(Activation act, const Tensor& x, const Tensor& y, Stream stream = {});
// dx = act'(x) * dy. All three alike; dx may be dy.
void activation_backward(Activation act, const Tensor& x, const Tensor& dy, const Tensor& dx,
                         Stream stream = {});

}  // namespace zrt::kernels
