// Per-element GELU (gelu_math.h) and ReLU, forward and backward, shared
// by the CPU twin and the CUDA kernel (Note [Compute precision] in element.h).
#pragma once

#include "zrt/kernels/gelu_math.h"
#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

enum class Activation : std::uint8_t { gelu, relu };

template <class A>
ZRT_HD A gelu_forward(A x) {
  return gelu_from_tanh(x, tanh_(gelu_tanh_arg(x)));
}

template <class A>
ZRT_HD A gelu_backward(A x, A dy) {
  return gelu_backward_from_tanh(x, tanh_(gelu_tanh_arg(x)), dy);
}

template <class A>
ZRT_HD A activation_forward(Activation act, A x) {
  if (act == Activation::gelu) return gelu_forward(x);
  return x > A(0) ? x : A(0);
}

// The gradient at input x given the output gradient dy. ReLU passes dy where
// x > 0 (gradient 0 at x = 0, as PyTorch).
template <class A>
ZRT_HD A activation_backward(Activation act, A x, A dy) {
  if (act == Activation::gelu) return gelu_backward(x, dy);
  return x > A(0) ? dy : A(0);
}

}  // namespace zrt::kernels
