// Causal multi-head softmax self-attention on a fused qkv activation:
// out = softmax(q·kᵀ/sqrt(hd) + causal mask)·v per (batch, head). See
// Note [Attention without the T×T matrix] in attention_math.h.
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// qkv: [B, T, 3C] (q | k | v), out: [B, T, C], one floating dtype; lse:
// [B, H, T] in acc_dtype (f32, or f64 for f64), saved for the backward.
// C must divide by n_head; the head dim is at most 256.
void attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse, std::int64_t n_head,
                       Stream stream = {});

// dqkv ([B, T, 3C]) is written from dout ([B, T, C]) and the forward's qkv,
// out and lse.
void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                        const Tensor& dqkv, std::int64_t n_head, Stream stream = {});

}  // namespace zrt::kernels
