// The instruction-set-dependent CPU kernels, included once by each
// isa_kernels_<isa>.cpp after it defines ZRT_ISA (the namespace of its copy),
// ZRT_ISA_ENUM and Eigen (renamed per copy; Note [Kernels per instruction
// set]). Everything here is inside that namespace or Eigen's renamed one.
#if !defined(ZRT_ISA) || !defined(ZRT_ISA_ENUM) || !defined(Eigen)
#error "isa_kernels_impl.h is included by isa_kernels_<isa>.cpp only"
#endif

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "zrt/kernels/cpu_isa/isa_kernels.h"
#include "zrt/kernels/gelu_math.h"

namespace zrt::kernels::ZRT_ISA {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using View = Eigen::Map<RowMat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using ConstView = Eigen::Map<const RowMat<T>, 0, Eigen::OuterStride<>>;

template <class T>
void gemm(const GemmCall<T>& g) {
  ConstView<T> a(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, Eigen::OuterStride<>(g.lda));
  ConstView<T> b(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, Eigen::OuterStride<>(g.ldb));
  View<T> c(g.c, g.m, g.n, Eigen::OuterStride<>(g.ldc));
  if (g.beta == T(0))
    c.setZero();
  else if (g.beta != T(1))
    c *= g.beta;
  if (g.k == 0) return;
  // Eigen folds alpha and the transposes into its packing: no copies.
  if (g.trans_a && g.trans_b)
    c.noalias() += g.alpha * a.transpose() * b.transpose();
  else if (g.trans_a)
    c.noalias() += g.alpha * a.transpose() * b;
  else if (g.trans_b)
    c.noalias() += g.alpha * a * b.transpose();
  else
    c.noalias() += g.alpha * a * b;
}

// c = alpha * op(a) · op(b) + beta * c through gemm(): every product of the
// attention below is one of its calls, so a copy instantiates Eigen's
// product kernels once per transpose pair (the attention's own product
// expressions were over half of this file's compile time).
template <class T>
void product(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
             const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
             std::int64_t ldc) {
  gemm<T>({trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc});
}

// One (batch, head) pair's rows in the [B, T, 3C] and [B, T, C] buffers:
// row t of q at q + t * ld3 (k and v C and 2C further), of out at
// o + t * ld1.
template <class T>
struct Head {
  Head(const AttentionDims& d, std::int64_t pair, const T* qkv, const T* out)
      : ld3(3 * d.channels),
        ld1(d.channels),
        dim(d.head_dim),
        q(qkv + offset(d, pair, 3)),
        k(q + d.channels),
        v(k + d.channels),
        o(out + offset(d, pair, 1)) {}
  // Element offset of the pair's first row in a [B, T, width * C] buffer.
  static std::int64_t offset(const AttentionDims& d, std::int64_t pair, std::int64_t width) {
    const std::int64_t b = pair / d.heads, h = pair % d.heads;
    return b * d.seq * width * d.channels + h * d.head_dim;
  }
  std::int64_t ld3, ld1, dim;
  const T *q, *k, *v, *o;
};

template <class T>
T attention_scale(const AttentionDims& d) {
  return T(1) / std::sqrt(T(d.head_dim));
}

// Scores of query rows [i0, i0 + rows) against keys [0, i0 + rows) into p
// (rows of length ldp): s = scale q kᵀ, then each row's softmax over its
// causal keys t2 <= t (zero beyond), from the row's own max (forward) or its
// saved lse (backward).
template <class T>
void causal_probabilities(const Head<T>& head, T scale, std::int64_t i0, std::int64_t rows, T* p,
                          std::int64_t ldp, T* lse, const T* saved_lse) {
  const std::int64_t keys = i0 + rows;
  product<T>(false, true, rows, keys, head.dim, scale, head.q + i0 * head.ld3, head.ld3, head.k,
             head.ld3, T(0), p, ldp);
  View<T> probs(p, rows, keys, Eigen::OuterStride<>(ldp));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t causal = i0 + r + 1;
    auto row = probs.row(r).head(causal).array();
    if (saved_lse) {
      row = (row - saved_lse[i0 + r]).exp();
    } else {
      const T m = row.maxCoeff();
      row = (row - m).exp();
      const T l = row.sum();
      row *= T(1) / l;
      lse[i0 + r] = m + std::log(l);
    }
    probs.row(r).tail(keys - causal).setZero();
  }
}

// Note [Blocked CPU attention]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Per (batch, head) pair and per block of kAttentionQueryBlock query rows,
// the block's scores against its causal keys are one GEMM, the softmax a
// vectorised pass over each row, and the output one more GEMM; the backward
// recomputes the block's probabilities from the saved lse (as the CUDA rows
// do, Note [Attention without the T×T matrix]) and forms dq, dk and dv with
// three GEMMs, using D[t] = dout_t · out_t. Memory beyond the outputs is two
// [block, T] score buffers per thread, never T×T. A pair is handled by one
// thread from start to end, so results do not depend on threading.
template <class T>
void attention_forward(const AttentionCall<T>& call) {
  const AttentionDims& d = call.dims;
  const T scale = attention_scale<T>(d);
  RowMat<T> scores(std::min(kAttentionQueryBlock, d.seq), d.seq);
  T* p = scores.data();
  for (std::int64_t pair = call.pair_begin; pair < call.pair_end; ++pair) {
    const Head<T> head(d, pair, call.qkv, call.out);
    T* out = call.out + Head<T>::offset(d, pair, 1);
    for (std::int64_t i0 = 0; i0 < d.seq; i0 += kAttentionQueryBlock) {
      const std::int64_t rows = std::min(kAttentionQueryBlock, d.seq - i0), keys = i0 + rows;
      causal_probabilities<T>(head, scale, i0, rows, p, d.seq, call.lse + pair * d.seq, nullptr);
      product<T>(false, false, rows, d.head_dim, keys, T(1), p, d.seq, head.v, head.ld3, T(0),
                 out + i0 * head.ld1, head.ld1);
    }
  }
}

template <class T>
void attention_backward(const AttentionCall<T>& call) {
  const AttentionDims& d = call.dims;
  const T scale = attention_scale<T>(d);
  const std::int64_t block = std::min(kAttentionQueryBlock, d.seq);
  RowMat<T> probs(block, d.seq), dscores(block, d.seq);
  T *p = probs.data(), *ds = dscores.data();
  for (std::int64_t pair = call.pair_begin; pair < call.pair_end; ++pair) {
    const Head<T> head(d, pair, call.qkv, call.out);
    const std::int64_t ld3 = head.ld3, ld1 = head.ld1, hd = d.head_dim;
    T* dq = call.dqkv + Head<T>::offset(d, pair, 3);
    T *dk = dq + d.channels, *dv = dk + d.channels;
    const T* dout = call.dout + Head<T>::offset(d, pair, 1);
    for (std::int64_t t = 0; t < d.seq; ++t) {
      std::fill(dk + t * ld3, dk + t * ld3 + hd, T(0));
      std::fill(dv + t * ld3, dv + t * ld3 + hd, T(0));
    }
    for (std::int64_t i0 = 0; i0 < d.seq; i0 += kAttentionQueryBlock) {
      const std::int64_t rows = std::min(kAttentionQueryBlock, d.seq - i0), keys = i0 + rows;
      causal_probabilities<T>(head, scale, i0, rows, p, d.seq, nullptr, call.lse + pair * d.seq);
      const T* dout_rows = dout + i0 * ld1;
      // dp = dout vᵀ, then ds = p ∘ (dp - D) row by row.
      product<T>(false, true, rows, keys, hd, T(1), dout_rows, ld1, head.v, ld3, T(0), ds, d.seq);
      const ConstView<T> dout_v(dout_rows, rows, hd, Eigen::OuterStride<>(ld1));
      const ConstView<T> out_v(head.o + i0 * ld1, rows, hd, Eigen::OuterStride<>(ld1));
      View<T> ds_v(ds, rows, keys, Eigen::OuterStride<>(d.seq));
      const View<T> p_v(p, rows, keys, Eigen::OuterStride<>(d.seq));
      for (std::int64_t r = 0; r < rows; ++r) {
        const T big_d = dout_v.row(r).dot(out_v.row(r));
        ds_v.row(r).array() = p_v.row(r).array() * (ds_v.row(r).array() - big_d);
      }
      product<T>(false, false, rows, hd, keys, scale, ds, d.seq, head.k, ld3, T(0), dq + i0 * ld3,
                 ld3);
      product<T>(true, false, keys, hd, rows, scale, ds, d.seq, head.q + i0 * ld3, ld3, T(1), dk,
                 ld3);
      product<T>(true, false, keys, hd, rows, T(1), p, d.seq, dout_rows, ld1, T(1), dv, ld3);
    }
  }
}

// GELU in chunks: u for the chunk, its tanh vectorised by Eigen, then
// finish(i, tanh(u_i)) for each element i: the rest of the shared arithmetic
// (gelu_math.h).
constexpr std::int64_t kGeluChunk = 256;

template <class T, class Finish>
void gelu_chunks(const T* x, std::int64_t n, const Finish& finish) {
  alignas(64) T t[kGeluChunk];
  for (std::int64_t i0 = 0; i0 < n; i0 += kGeluChunk) {
    const std::int64_t len = std::min(kGeluChunk, n - i0);
    for (std::int64_t i = 0; i < len; ++i) t[i] = gelu_tanh_arg(x[i0 + i]);
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> chunk(t, len);
    chunk = chunk.tanh();
    for (std::int64_t i = 0; i < len; ++i) finish(i0 + i, t[i]);
  }
}

template <class T>
void gelu_forward(const T* x, T* y, std::int64_t n) {
  gelu_chunks(x, n, [&](std::int64_t i, T t) { y[i] = gelu_from_tanh(x[i], t); });
}

template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, std::int64_t n) {
  gelu_chunks(x, n, [&](std::int64_t i, T t) { dx[i] = gelu_backward_from_tanh(x[i], t, dy[i]); });
}

template <class T>
constexpr IsaTable<T> table_of() {
  return {gemm<T>, attention_forward<T>, attention_backward<T>, gelu_forward<T>, gelu_backward<T>};
}

}  // namespace

const IsaKernels& kernels() {
  static constexpr IsaKernels table{ZRT_ISA_ENUM, ZRT_ISA_NAME, table_of<float>(),
                                    table_of<double>()};
  return table;
}

}  // namespace zrt::kernels::ZRT_ISA
