// Per-element GELU (tanh approximation) and ReLU, forward and backward, shared
// by the CPU twin and the CUDA kernel (Note [Compute precision] in element.h).
#pragma once

#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

enum class Activation : std::uint8_t { gelu, relu };

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), as
// torch.nn.functional.gelu(approximate="tanh") and GPT-2.
template <class A>
ZRT_HD A gelu_forward(A x) {
  const A c = A(0.7978845608028654), k = A(0.044715);
  return A(0.5) * x * (A(1) + tanh_(c * (x + k * x * x * x)));
}

template <class A>
ZRT_HD A gelu_backward(A x, A dy) {
  const A c = A(0.7978845608028654), k = A(0.044715);
  const A t = tanh_(c * (x + k * x * x * x));
  const A du = c * (A(1) + A(3) * k * x * x);
  return dy * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * du);
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
