#include "zrt/kernels/nn/attention_gemm.h"

#include <algorithm>
#include <cmath>

#include "zrt/kernels/nn/batched_gemm.h"
#include "zrt/kernels/nn/causal_softmax.h"
#include "zrt/kernels/nn/nn_checks.h"

namespace zrt::kernels {
namespace {

// One round: batch elements [b0, b0 + nb) × heads [h0, h0 + nh), with nb > 1
// only when nh is every head, so the round's lse rows are contiguous.
struct Round {
  std::int64_t b0, nb, h0, nh;
  std::int64_t pairs() const { return nb * nh; }
};

// The rounds of `choice`, in order.
template <class F>
void for_each_round(const AttentionDims& d, const AttentionChoice& choice, const F& f) {
  const std::int64_t bc = std::max<std::int64_t>(choice.batch_per_round, 1);
  const std::int64_t hc = std::max<std::int64_t>(choice.heads_per_round, 1);
  for (std::int64_t b0 = 0; b0 < d.batch; b0 += bc)
    for (std::int64_t h0 = 0; h0 < d.heads; h0 += hc)
      f(Round{b0, std::min(bc, d.batch - b0), h0, std::min(hc, d.heads - h0)});
}

// The workspace of one round: scores (accumulation dtype) and probabilities
// (activation dtype), [pairs, T, T] each, from the activations' allocator.
struct Workspace {
  Tensor scores, probs;
  Workspace(const AttentionDims& d, const AttentionChoice& choice, const Tensor& like,
            Stream stream) {
    const Shape shape{choice.batch_per_round * choice.heads_per_round, d.seq, d.seq};
    const AllocatorPtr& alloc = like.storage().allocator();
    scores = Tensor::empty(shape, acc_dtype(like.dtype()), like.device(), alloc, stream);
    probs = Tensor::empty(shape, like.dtype(), like.device(), alloc, stream);
  }
  Tensor scores_of(const Round& r) const { return scores.narrow(0, r.pairs()); }
  Tensor probs_of(const Round& r) const { return probs.narrow(0, r.pairs()); }
};

// The elements from `start` on of `t`, flat: a round's operands begin there.
Tensor from(const Tensor& t, std::int64_t start) {
  return t.flatten().slice(start, t.numel() - start);
}

// A T × hd slice per pair of an activation whose rows are `row` elements
// apart (3C for qkv and dqkv, C for out and dout).
BatchedOperand head_slices(const AttentionDims& d, std::int64_t row) {
  return {row, d.seq * row, d.head_dim};
}

// A T × T matrix per pair of the workspace.
BatchedOperand squares(const AttentionDims& d, const Round& r) {
  return {d.seq, r.nh * d.seq * d.seq, d.seq * d.seq};
}

// Offset of (b0, h0)'s first row in an activation of `row`-element rows.
std::int64_t head_offset(const AttentionDims& d, const Round& r, std::int64_t row) {
  return r.b0 * d.seq * row + r.h0 * d.head_dim;
}

// lse rows of the round: [pairs, T] from (b0, h0) on.
Tensor lse_of(const AttentionDims& d, const Round& r, const Tensor& lse) {
  return lse.flatten().slice((r.b0 * d.heads + r.h0) * d.seq, r.pairs() * d.seq);
}

double score_scale(const AttentionDims& d) { return 1.0 / std::sqrt(double(d.head_dim)); }

// S = s·Q·Kᵀ of the round into the workspace's scores.
void scores_gemm(const AttentionDims& d, const Round& r, const Tensor& qkv, const Tensor& scores,
                 Stream stream) {
  const std::int64_t s3 = 3 * d.channels, q = head_offset(d, r, s3);
  BatchedGemm g;
  g.trans_b = true;
  g.m = d.seq, g.n = d.seq, g.k = d.head_dim;
  g.outer = r.nb, g.inner = r.nh;
  g.a = head_slices(d, s3);
  g.b = head_slices(d, s3);
  g.c = squares(d, r);
  g.alpha = score_scale(d);
  // a starts at Q, b at K: two views, one C apart.
  batched_gemm(from(qkv, q), from(qkv, q + d.channels), scores, g, stream);
}

}  // namespace

void attention_gemm_forward(const AttentionDims& d, const AttentionChoice& choice,
                            const Tensor& qkv, const Tensor& out, const Tensor& lse,
                            Stream stream) {
  ZRT_CHECK_ARG(choice.path == AttentionPath::gemm, "attention_gemm_forward: the ",
                attention_path_name(choice.path), " path is not the gemm path");
  const Workspace ws(d, choice, qkv, stream);
  const std::int64_t s3 = 3 * d.channels;
  for_each_round(d, choice, [&](const Round& r) {
    const Tensor scores = ws.scores_of(r), probs = ws.probs_of(r);
    scores_gemm(d, r, qkv, scores, stream);
    causal_softmax_forward(scores, probs, lse_of(d, r, lse), stream);
    BatchedGemm g;  // O = P·V
    g.m = d.seq, g.n = d.head_dim, g.k = d.seq;
    g.outer = r.nb, g.inner = r.nh;
    g.a = squares(d, r);
    g.b = head_slices(d, s3);
    g.c = head_slices(d, d.channels);
    batched_gemm(probs, from(qkv, head_offset(d, r, s3) + 2 * d.channels),
                 from(out, head_offset(d, r, d.channels)), g, stream);
  });
}

void attention_gemm_backward(const AttentionDims& d, const AttentionChoice& choice,
                             const Tensor& dout, const Tensor& qkv, const Tensor& lse,
                             const Tensor& dqkv, Stream stream) {
  ZRT_CHECK_ARG(choice.path == AttentionPath::gemm, "attention_gemm_backward: the ",
                attention_path_name(choice.path), " path is not the gemm path");
  const Workspace ws(d, choice, qkv, stream);
  const std::int64_t s3 = 3 * d.channels;
  const double scale = score_scale(d);
  for_each_round(d, choice, [&](const Round& r) {
    const Tensor scores = ws.scores_of(r), probs = ws.probs_of(r);
    const std::int64_t q = head_offset(d, r, s3), o = head_offset(d, r, d.channels);
    const Tensor q_in = from(qkv, q), k_in = from(qkv, q + d.channels);
    const Tensor v_in = from(qkv, q + 2 * d.channels), do_in = from(dout, o);
    scores_gemm(d, r, qkv, scores, stream);
    causal_softmax_recompute(scores, lse_of(d, r, lse), probs, stream);

    BatchedGemm g;
    g.outer = r.nb, g.inner = r.nh;
    // dV = Pᵀ·dO: [keys, hd] from P [queries, keys] transposed.
    g.trans_a = true, g.trans_b = false;
    g.m = d.seq, g.n = d.head_dim, g.k = d.seq;
    g.a = squares(d, r), g.b = head_slices(d, d.channels), g.c = head_slices(d, s3);
    batched_gemm(probs, do_in, from(dqkv, q + 2 * d.channels), g, stream);

    // dP = dO·Vᵀ into the scores, which are spent.
    g.trans_a = false, g.trans_b = true;
    g.m = d.seq, g.n = d.seq, g.k = d.head_dim;
    g.a = head_slices(d, d.channels), g.b = head_slices(d, s3), g.c = squares(d, r);
    batched_gemm(do_in, v_in, scores, g, stream);

    // dS over P.
    causal_softmax_backward(probs, scores, probs, stream);

    // dQ = s·dS·K and dK = s·dSᵀ·Q.
    g.trans_b = false;
    g.m = d.seq, g.n = d.head_dim, g.k = d.seq;
    g.a = squares(d, r), g.b = head_slices(d, s3), g.c = head_slices(d, s3);
    g.alpha = scale;
    g.trans_a = false;
    batched_gemm(probs, k_in, from(dqkv, q), g, stream);
    g.trans_a = true;
    batched_gemm(probs, q_in, from(dqkv, q + d.channels), g, stream);
  });
}

}  // namespace zrt::kernels
