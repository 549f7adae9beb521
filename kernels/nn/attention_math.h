// Causal softmax attention, one query (or key) row at a time, shared by the
// CPU twin (rows over threads) and the CUDA kernels (a row per thread).
//
// Note [Attention without the T×T matrix]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The forward saves only lse[t] = log Σ_{t2≤t} exp(s[t,t2]) per query row,
// with s = q·k / sqrt(hd). The backward recomputes p[t,t2] = exp(s - lse[t])
// and uses D[t] = Σ_t2 p·(dout_t·v_t2) = dout_t·out_t, so it needs no T×T
// buffer either: a query pass gives dq and D, a key pass gives dk and dv.
// Every sum runs in a fixed order, so results do not depend on threading.
//
// Layout: qkv [B, T, 3C] holds q | k | v along the last dim, head h owning
// features [h*hd, (h+1)*hd) of each; out and dout are [B, T, C]; lse and D
// are [B, H, T].
#pragma once

#include "zrt/kernels/attention_dims.h"
#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

// Head dims up to this fit a row's per-thread accumulators.
inline constexpr std::int64_t kMaxAttentionHeadDim = 256;

// The rows of a tile of `len` rows from row r0 that lie before row seq (the
// tiled and the flash kernels' last tile is partial).
ZRT_HD inline std::int64_t attention_tile_len(std::int64_t r0, std::int64_t len, std::int64_t seq) {
  return seq - r0 < len ? seq - r0 : len;
}

template <class T, class A>
ZRT_HD A attention_dot(const T* a, const T* b, std::int64_t n) {
  A s = 0;
  for (std::int64_t d = 0; d < n; ++d) s += load<A>(a[d]) * load<A>(b[d]);
  return s;
}

// The scores' scale, 1/sqrt(hd).
template <class A>
ZRT_HD A attention_scale(std::int64_t hd) {
  return A(1) / sqrt_(A(hd));
}

// The (batch, head) pair `pair` in [0, B*H): query/key row t of head h of
// batch b sits at qkv + base_off + t*3C (+C for k, +2C for v), its out and
// dout row at obase_off + t*C, its lse and D at lse_off + t.
struct AttentionPair {
  std::int64_t b, h, c, s3, obase_off, base_off, lse_off;
  ZRT_HD AttentionPair(const AttentionDims& d, std::int64_t pair)
      : b(pair / d.heads),
        h(pair % d.heads),
        c(d.channels),
        s3(3 * d.channels),
        obase_off(b * d.seq * d.channels + h * d.head_dim),
        base_off(b * d.seq * 3 * d.channels + h * d.head_dim),
        lse_off(pair * d.seq) {}
};

// Row index r in [0, B*H*T): row t of pair r / T, with the offsets of the
// pair's row t2 in qkv (query, key) and in out/dout.
struct AttentionRow : AttentionPair {
  std::int64_t t;
  ZRT_HD AttentionRow(const AttentionDims& d, std::int64_t r)
      : AttentionPair(d, r / d.seq), t(r % d.seq) {}
  ZRT_HD std::int64_t q_off(std::int64_t t2) const { return base_off + t2 * s3; }
  ZRT_HD std::int64_t k_off(std::int64_t t2) const { return q_off(t2) + c; }
  ZRT_HD std::int64_t o_off(std::int64_t t2) const { return obase_off + t2 * c; }
};

// The operands of an attention backward with their element types (A: the
// row statistics'), as the CUDA launchers hand them to their kernels and
// the host emulations to the same tile functions.
template <class T, class A>
struct AttentionBackwardArgs {
  AttentionDims d;
  const T* dout;
  const T* qkv;
  const T* out;
  const A* lse;
  A* dsum;
  T* dqkv;
  AttentionBackwardArgs(const AttentionDims& dims, const void* dout_, const void* qkv_,
                        const void* out_, const void* lse_, void* dsum_, void* dqkv_)
      : d(dims),
        dout(static_cast<const T*>(dout_)),
        qkv(static_cast<const T*>(qkv_)),
        out(static_cast<const T*>(out_)),
        lse(static_cast<const A*>(lse_)),
        dsum(static_cast<A*>(dsum_)),
        dqkv(static_cast<T*>(dqkv_)) {}
};

// D[r] = dout·out of row r ([B, H, T]), which the backward passes subtract
// (Note [Attention without the T×T matrix]).
template <class T, class A>
ZRT_HD A attention_row_dsum(const AttentionDims& d, std::int64_t r, const T* dout, const T* out) {
  const AttentionRow row(d, r);
  const std::int64_t off = row.o_off(row.t);
  return attention_dot<T, A>(dout + off, out + off, d.head_dim);
}

template <class T, class A>
ZRT_HD void attention_forward_row(const AttentionDims& d, std::int64_t r, const T* qkv, T* out,
                                  A* lse) {
  const AttentionRow row(d, r);
  const std::int64_t hd = d.head_dim;
  const A scale = attention_scale<A>(hd);
  const T* q = qkv + row.q_off(row.t);
  // Online max and sum of exp over the causal keys t2 <= t.
  A m = scale * attention_dot<T, A>(q, qkv + row.k_off(0), hd), l = 1;
  for (std::int64_t t2 = 1; t2 <= row.t; ++t2) {
    const A s = scale * attention_dot<T, A>(q, qkv + row.k_off(t2), hd);
    if (s > m) {
      l = l * exp_(m - s) + A(1);
      m = s;
    } else {
      l += exp_(s - m);
    }
  }
  const A row_lse = m + log_(l);
  A acc[kMaxAttentionHeadDim];
  for (std::int64_t i = 0; i < hd; ++i) acc[i] = 0;
  for (std::int64_t t2 = 0; t2 <= row.t; ++t2) {
    const T* k = qkv + row.k_off(t2);
    const A p = exp_(scale * attention_dot<T, A>(q, k, hd) - row_lse);
    const T* v = k + row.c;
    for (std::int64_t i = 0; i < hd; ++i) acc[i] += p * load<A>(v[i]);
  }
  T* o = out + row.o_off(row.t);
  for (std::int64_t i = 0; i < hd; ++i) o[i] = store<T>(acc[i]);
  lse[r] = row_lse;
}

// Query pass of the backward: D[r] and the q part of dqkv for query row r.
template <class T, class A>
ZRT_HD void attention_backward_query_row(const AttentionDims& d, std::int64_t r, const T* dout,
                                         const T* qkv, const T* out, const A* lse, A* dsum,
                                         T* dqkv) {
  const AttentionRow row(d, r);
  const std::int64_t hd = d.head_dim;
  const A scale = attention_scale<A>(hd);
  const T* q = qkv + row.q_off(row.t);
  const T* dout_t = dout + row.o_off(row.t);
  const A big_d = attention_row_dsum<T, A>(d, r, dout, out);
  A acc[kMaxAttentionHeadDim];
  for (std::int64_t i = 0; i < hd; ++i) acc[i] = 0;
  for (std::int64_t t2 = 0; t2 <= row.t; ++t2) {
    const T* k = qkv + row.k_off(t2);
    const A p = exp_(scale * attention_dot<T, A>(q, k, hd) - lse[r]);
    const A ds = p * (attention_dot<T, A>(dout_t, k + row.c, hd) - big_d);
    for (std::int64_t i = 0; i < hd; ++i) acc[i] += ds * load<A>(k[i]);
  }
  T* dq = dqkv + row.q_off(row.t);
  for (std::int64_t i = 0; i < hd; ++i) dq[i] = store<T>(scale * acc[i]);
  dsum[r] = big_d;
}

// Key pass: the k and v parts of dqkv for key row r (needs every D of the
// query pass).
template <class T, class A>
ZRT_HD void attention_backward_key_row(const AttentionDims& d, std::int64_t r, const T* dout,
                                       const T* qkv, const A* lse, const A* dsum, T* dqkv) {
  const AttentionRow row(d, r);
  const std::int64_t hd = d.head_dim;
  const A scale = attention_scale<A>(hd);
  const T* k = qkv + row.k_off(row.t);
  const T* v = k + row.c;
  const std::int64_t r0 = r - row.t;  // row index of query 0 of this (b, h)
  A dk[kMaxAttentionHeadDim], dv[kMaxAttentionHeadDim];
  for (std::int64_t i = 0; i < hd; ++i) dk[i] = dv[i] = 0;
  for (std::int64_t t = row.t; t < d.seq; ++t) {
    const T* q = qkv + row.q_off(t);
    const T* dout_t = dout + row.o_off(t);
    const A p = exp_(scale * attention_dot<T, A>(q, k, hd) - lse[r0 + t]);
    const A ds = p * (attention_dot<T, A>(dout_t, v, hd) - dsum[r0 + t]);
    for (std::int64_t i = 0; i < hd; ++i) {
      dk[i] += ds * load<A>(q[i]);
      dv[i] += p * load<A>(dout_t[i]);
    }
  }
  T* dk_out = dqkv + row.k_off(row.t);
  for (std::int64_t i = 0; i < hd; ++i) {
    dk_out[i] = store<T>(scale * dk[i]);
    dk_out[row.c + i] = store<T>(dv[i]);
  }
}

}  // namespace zrt::kernels
