// The causal softmax of attention's GEMM path (Note [Attention on GEMMs]),
// per element and per row, shared by the CPU twin and the CUDA row kernels.
//
// Scores are [pairs, T, T] in the accumulation type, already scaled by
// 1/sqrt(hd); row t of a pair sees keys 0..t. Probabilities are stored in
// the activation dtype, zero above the diagonal, so the GEMMs that read them
// need no mask.
#pragma once

#include <cstdint>

#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

// A running max and sum of exp(s - max) over part of a row; l == 0 means no
// element yet (m is then meaningless), so merging never subtracts infinities.
template <class A>
struct SoftmaxPartial {
  A m = 0, l = 0;
};

template <class A>
ZRT_HD SoftmaxPartial<A> softmax_add(SoftmaxPartial<A> p, A s) {
  if (p.l == A(0)) return {s, A(1)};
  if (s > p.m) return {s, p.l * exp_(p.m - s) + A(1)};
  return {p.m, p.l + exp_(s - p.m)};
}

template <class A>
ZRT_HD SoftmaxPartial<A> softmax_merge(SoftmaxPartial<A> a, SoftmaxPartial<A> b) {
  if (a.l == A(0)) return b;
  if (b.l == A(0)) return a;
  const A m = a.m > b.m ? a.m : b.m;
  return {m, a.l * exp_(a.m - m) + b.l * exp_(b.m - m)};
}

template <class A>
ZRT_HD A softmax_lse(SoftmaxPartial<A> p) {
  return p.m + log_(p.l);
}

// The probability of score s in a row of log-sum-exp lse.
template <class A>
ZRT_HD A causal_prob(A s, A lse) {
  return exp_(s - lse);
}

// d score from the probability, its gradient and the row's Σ p·dp.
template <class A>
ZRT_HD A causal_dscore(A p, A dp, A p_dot_dp) {
  return p * (dp - p_dot_dp);
}

// Row r of [pairs, T, T] is query t = r % T of its pair: keys 0..t count.
ZRT_HD inline std::int64_t causal_row_keys(std::int64_t r, std::int64_t seq) { return r % seq + 1; }

// --- whole rows, in order (the CPU twin) ----------------------------------

// lse of row r and its probabilities (zero above the diagonal).
template <class T, class A>
void causal_softmax_forward_row(std::int64_t r, std::int64_t seq, const A* scores, T* probs,
                                A* lse) {
  const A* s = scores + r * seq;
  const std::int64_t keys = causal_row_keys(r, seq);
  SoftmaxPartial<A> part;
  for (std::int64_t j = 0; j < keys; ++j) part = softmax_add(part, s[j]);
  const A row_lse = softmax_lse(part);
  T* p = probs + r * seq;
  for (std::int64_t j = 0; j < keys; ++j) p[j] = store<T>(causal_prob(s[j], row_lse));
  for (std::int64_t j = keys; j < seq; ++j) p[j] = store<T>(A(0));
  lse[r] = row_lse;
}

// Row r's probabilities from its scores and a saved lse.
template <class T, class A>
void causal_softmax_recompute_row(std::int64_t r, std::int64_t seq, const A* scores, const A* lse,
                                  T* probs) {
  const A* s = scores + r * seq;
  const std::int64_t keys = causal_row_keys(r, seq);
  T* p = probs + r * seq;
  for (std::int64_t j = 0; j < keys; ++j) p[j] = store<T>(causal_prob(s[j], lse[r]));
  for (std::int64_t j = keys; j < seq; ++j) p[j] = store<T>(A(0));
}

// Row r's score gradients, written over its probabilities (ds may be p).
template <class T, class A>
void causal_softmax_backward_row(std::int64_t r, std::int64_t seq, const T* probs, const A* dprobs,
                                 T* dscores) {
  const T* p = probs + r * seq;
  const A* dp = dprobs + r * seq;
  const std::int64_t keys = causal_row_keys(r, seq);
  A dot = 0;
  for (std::int64_t j = 0; j < keys; ++j) dot += load<A>(p[j]) * dp[j];
  T* ds = dscores + r * seq;
  for (std::int64_t j = 0; j < keys; ++j)
    ds[j] = store<T>(causal_dscore(load<A>(p[j]), dp[j], dot));
  for (std::int64_t j = keys; j < seq; ++j) ds[j] = store<T>(A(0));
}

}  // namespace zrt::kernels
