// Fused softmax cross-entropy arithmetic shared by the CPU twin and the CUDA
// kernels. A row's loss is lse - logit[target] with lse = log Σ exp(logit);
// rows whose target is negative are ignored (loss 0, gradient 0).
#pragma once

#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

// d loss_mean / d logit for one element: (softmax - onehot) * scale, with
// scale = dloss / normaliser.
template <class A>
ZRT_HD A cross_entropy_dlogit(A logit, A lse, bool is_target, A scale) {
  return (exp_(logit - lse) - (is_target ? A(1) : A(0))) * scale;
}

}  // namespace zrt::kernels
