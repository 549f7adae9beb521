// The causal softmax between attention's score and output GEMMs (Note
// [Attention on GEMMs]): forward, recompute from a saved log-sum-exp, and
// backward. scores and dprobs are [pairs, T, T] in the accumulation dtype
// (f32, f64 for f64); probs and dscores [pairs, T, T] in the activation
// dtype; lse [pairs, T] in the accumulation dtype. Row t of each pair sees
// keys 0..t; probabilities and score gradients above the diagonal are 0.
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// lse = log Σ exp(scores) per row, probs = exp(scores - lse).
void causal_softmax_forward(const Tensor& scores, const Tensor& probs, const Tensor& lse,
                            Stream stream = {});
// probs = exp(scores - lse) with a given lse.
void causal_softmax_recompute(const Tensor& scores, const Tensor& lse, const Tensor& probs,
                              Stream stream = {});
// dscores = probs · (dprobs - Σ_row probs · dprobs); dscores may be probs.
void causal_softmax_backward(const Tensor& probs, const Tensor& dprobs, const Tensor& dscores,
                             Stream stream = {});

}  // namespace zrt::kernels
