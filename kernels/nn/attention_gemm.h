// Causal attention as strided-batched GEMMs and a causal softmax: the same
// calls on CUDA (cuBLAS, tensor cores) and on the CPU (their twins). See
// Note [Attention on GEMMs].
#pragma once

#include "zrt/kernels/attention_dims.h"
#include "zrt/kernels/nn/attention_path.h"
#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// Note [Attention on GEMMs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Per (batch b, head h) pair, with Q, K, V the T × hd slices of qkv (rows
// 3C apart) and s = 1/sqrt(hd):
//   forward   S = s·Q·Kᵀ (accumulation dtype), P, lse = causal_softmax(S)
//             (P in the activation dtype, 0 above the diagonal), O = P·V;
//   backward  S = s·Q·Kᵀ again, P = exp(S - lse), dV = Pᵀ·dO, dP = dO·Vᵀ,
//             dS = P·(dP - Σ_row P·dP) written over P, dQ = s·dS·K,
//             dK = s·dSᵀ·Q.
// Every product is one batched_gemm call over a round's pairs (two levels
// of stride: batch elements T·3C apart, heads hd apart), which cuBLAS runs
// on the tensor cores, and the CPU on its GEMM backend with the very same
// arguments. Only lse ([B, H, T]) is kept for the backward, as the other
// paths keep (Note [Attention without the T×T matrix]); the T² scores and
// probabilities live in a workspace of one round
// (AttentionChoice::workspace_bytes, from the activations' allocator, freed
// when the call returns; the memory plan counts it: Note [CUDA kernels
// planned on the CPU]). The GEMMs compute the masked upper triangle too (2×
// the causal work), and P is rounded to the activation dtype before P·V as
// the tensor cores take it.

// qkv [B, T, 3C], out [B, T, C], lse [B, H, T] as attention.h's; `choice`
// a gemm choice for these dims.
void attention_gemm_forward(const AttentionDims& d, const AttentionChoice& choice,
                            const Tensor& qkv, const Tensor& out, const Tensor& lse, Stream stream);
void attention_gemm_backward(const AttentionDims& d, const AttentionChoice& choice,
                             const Tensor& dout, const Tensor& qkv, const Tensor& lse,
                             const Tensor& dqkv, Stream stream);

}  // namespace zrt::kernels
