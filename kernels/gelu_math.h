// GELU (tanh approximation) split around its tanh, so the CUDA kernel (tanhf
// per element) and the CPU kernels (a vectorised tanh over a block, see
// cpu_isa/) share every other operation:
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3),
// as torch.nn.functional.gelu(approximate="tanh") and GPT-2.
#pragma once

#include "zrt/kernels/hd.h"

namespace zrt::kernels {

inline constexpr double kGeluC = 0.7978845608028654, kGeluK = 0.044715;

// u, the argument of the tanh.
template <class A>
ZRT_HD A gelu_tanh_arg(A x) {
  return A(kGeluC) * (x + A(kGeluK) * x * x * x);
}

// gelu(x) given t = tanh(u).
template <class A>
ZRT_HD A gelu_from_tanh(A x, A t) {
  return A(0.5) * x * (A(1) + t);
}

// dy * gelu'(x) given t = tanh(u).
template <class A>
ZRT_HD A gelu_backward_from_tanh(A x, A t, A dy) {
  const A du = A(kGeluC) * (A(1) + A(3) * A(kGeluK) * x * x);
  return dy * (A(0.5) * (A(1) + t) + A(0.5) * x * (A(1) - t * t) * du);
}

}  // namespace zrt::kernels
