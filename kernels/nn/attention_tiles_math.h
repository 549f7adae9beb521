// The tiled (flash-style) causal attention of the fast CUDA kernels, written
// once over a "block" that runs a loop body for every index of a tile and
// synchronises: the CUDA kernels run it with a thread block (threads stride
// over the indices), the host emulation with one thread in index order, so
// the tests here run the kernels' real algorithm against the CPU twin.
//
// Note [Tiled causal attention]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Per (batch, head) pair the T query rows split into tiles of kAttnBr rows
// and the key/value rows into tiles of kAttnBc; a tile's operands live in
// shared memory in the accumulation type A (f32, f64 for f64), never more
// than a tile's rows, so no thread holds anything of length T.
//  - Forward, a block per (pair, query tile): for each key/value tile up to
//    the causal diagonal, load K and V, form the scores S = q·k·scale of the
//    tile (masked: -inf), update each row's running max m and sum l (online
//    softmax: alpha = exp(m_old - m_new), l = l·alpha + Σ exp(s - m_new)),
//    and rescale the output accumulator, O = O·alpha + P·V. At the end
//    out = O / l and lse = m + log l, the layout of the simple kernel, so the
//    backward (either version) reads it unchanged.
//  - Backward: D = dout·out per row (a thread per row); a block per (pair,
//    key/value tile) loops over the query tiles from the diagonal on,
//    recomputing P = exp(s - lse) and dS = P·(dout·v - D), and accumulates
//    dV += Pᵀ·dout and dK += dSᵀ·q; a second kernel, a block per (pair,
//    query tile), loops over the key/value tiles up to the diagonal and
//    accumulates dQ += dS·K. Every output element is summed by one thread in
//    a fixed order (tiles in order, rows of a tile in order, the head dim in
//    order), with no atomics, so results are run-to-run deterministic.
// K and V tiles keep rows of hd + 1 elements in shared memory: the score
// steps give a warp's lanes one query row and 32 keys, and with rows of hd
// (a multiple of 32) every lane's K or V read would fall in one bank.
// Shared memory per block, in elements of A (hd the head dim):
//   forward  (2·Br + 2·Bc)·hd + 2·Bc + Br·Bc + 3·Br,
//   dK/dV    (2·Br + 4·Bc)·hd + 2·Bc + 2·Br·Bc + 2·Br,
//   dQ       (3·Br + 2·Bc)·hd + 2·Bc + 2·Br·Bc + 2·Br;
// the launcher takes the simple kernels when that exceeds what the device
// grants a block (f32 at hd 256 needs 201 KiB for dK/dV, within an H100's
// 227 KiB).
#pragma once

#include <cstdint>
#include <vector>

#include "zrt/kernels/nn/attention_math.h"

namespace zrt::kernels {

inline constexpr int kAttnBr = 32;  // query rows per tile
inline constexpr int kAttnBc = 32;  // key/value rows per tile
inline constexpr int kAttnThreads = 128;

// Tiles of `len` rows covering n rows.
ZRT_HD inline std::int64_t attention_tiles(std::int64_t n, std::int64_t len) {
  return (n + len - 1) / len;
}

// Key/value tiles query tile qt attends to: those holding a key <= its last
// query row (and < seq).
ZRT_HD inline std::int64_t attention_kv_tiles_of(std::int64_t seq, std::int64_t qt) {
  std::int64_t last = (qt + 1) * kAttnBr - 1;
  if (last > seq - 1) last = seq - 1;
  return last / kAttnBc + 1;
}

// The first query tile that attends to key/value tile kt: the one holding
// query row kt·Bc.
ZRT_HD inline std::int64_t attention_first_query_tile(std::int64_t kt) {
  return kt * kAttnBc / kAttnBr;
}

// The causal mask of a tile element: query row q sees key row k.
ZRT_HD inline bool attention_visible(std::int64_t q, std::int64_t k, std::int64_t seq) {
  return q < seq && k <= q;
}

template <class A>
ZRT_HD A attention_neg_inf() {
  return -static_cast<A>(INFINITY);
}

// Σ a[x]·b[x], x in order, on tile rows in shared memory.
template <class A>
ZRT_HD A attention_tile_dot(const A* a, const A* b, std::int64_t n) {
  A s = 0;
  for (std::int64_t x = 0; x < n; ++x) s += a[x] * b[x];
  return s;
}

// The online-softmax update of one query row over a tile of n scores s
// (masked ones -inf): m and l become the running max and sum of exp(s - m)
// over every tile so far, alpha the factor the row's earlier output
// accumulator takes, and s the tile's probabilities exp(s - m) (0 where
// masked). A row with nothing visible yet keeps m = -inf, l = 0, alpha = 1.
template <class A>
ZRT_HD void attention_online_softmax(A* s, int n, A& m, A& l, A& alpha) {
  const A ninf = attention_neg_inf<A>();
  A mt = m;
  for (int c = 0; c < n; ++c) mt = s[c] > mt ? s[c] : mt;
  if (mt == ninf) {
    alpha = 1;
    for (int c = 0; c < n; ++c) s[c] = 0;
    return;
  }
  alpha = m == ninf ? A(0) : exp_(m - mt);
  A sum = 0;
  for (int c = 0; c < n; ++c) {
    const A p = s[c] == ninf ? A(0) : exp_(s[c] - mt);
    s[c] = p;
    sum += p;
  }
  l = l * alpha + sum;
  m = mt;
}

// Row base pointers of a pair: qkv row t of pair p at base + t·3C (+C k,
// +2C v); out/dout row t at obase + t·C.
struct AttentionPair {
  std::int64_t b, h, s3, obase_off, base_off;
  ZRT_HD AttentionPair(const AttentionDims& d, std::int64_t pair)
      : b(pair / d.heads),
        h(pair % d.heads),
        s3(3 * d.channels),
        obase_off(b * d.seq * d.channels + h * d.head_dim),
        base_off(b * d.seq * 3 * d.channels + h * d.head_dim) {}
};

// The row length of K and V tiles in shared memory (Note [Tiled causal attention]).
ZRT_HD inline std::int64_t attention_kv_ld(std::int64_t hd) { return hd + 1; }

// Loads rows [r0, r0 + n) (feature offset `off` in rows of `stride`) of a
// tile of `rows` rows into dst, rows `ld` apart, zero past n.
template <class T, class A, class Block>
ZRT_HD void attention_load_tile(const Block& blk, A* dst, const T* src, std::int64_t stride,
                                std::int64_t r0, std::int64_t n, int rows, std::int64_t hd,
                                std::int64_t ld) {
  blk.for_each(int(rows * hd), [&](int idx) {
    const std::int64_t i = idx / hd, x = idx % hd;
    dst[i * ld + x] = i < n ? load<A>(src[(r0 + i) * stride + x]) : A(0);
  });
}

// Loads rows [k0, k0 + kn) of a pair's keys and values into the tiles K and
// V (rows attention_kv_ld apart), zero past kn.
template <class T, class A, class Block>
ZRT_HD void attention_load_kv_tile(const Block& blk, const AttentionDims& d,
                                   const AttentionPair& pr, const T* qkv, std::int64_t k0,
                                   std::int64_t kn, A* K, A* V) {
  const T* base = qkv + pr.base_off;
  const std::int64_t hd = d.head_dim, ld = attention_kv_ld(hd);
  attention_load_tile<T, A>(blk, K, base + d.channels, pr.s3, k0, kn, kAttnBc, hd, ld);
  attention_load_tile<T, A>(blk, V, base + 2 * d.channels, pr.s3, k0, kn, kAttnBc, hd, ld);
}

// Forward of query tile qt of pair `pair` (Note [Tiled causal attention]).
// smem: attention_forward_smem(hd) elements.
template <class T, class A, class Block>
ZRT_HD void attention_forward_tile(const Block& blk, const AttentionDims& d, std::int64_t pair,
                                   std::int64_t qt, const T* qkv, T* out, A* lse, A* smem) {
  const std::int64_t hd = d.head_dim, seq = d.seq;
  const AttentionPair pr(d, pair);
  const T* base = qkv + pr.base_off;
  const A scale = A(1) / sqrt_(A(hd));
  const std::int64_t q0 = qt * kAttnBr, qn = attention_tile_len(q0, kAttnBr, seq);
  const std::int64_t ld = attention_kv_ld(hd);
  A* Q = smem;
  A* O = Q + kAttnBr * hd;
  A* K = O + kAttnBr * hd;
  A* V = K + kAttnBc * ld;
  A* S = V + kAttnBc * ld;
  A* M = S + kAttnBr * kAttnBc;
  A* L = M + kAttnBr;
  A* Alpha = L + kAttnBr;
  attention_load_tile<T, A>(blk, Q, base, pr.s3, q0, qn, kAttnBr, hd, hd);
  blk.for_each(int(kAttnBr * hd), [&](int idx) { O[idx] = 0; });
  blk.for_each(kAttnBr, [&](int i) {
    M[i] = attention_neg_inf<A>();
    L[i] = 0;
  });
  const std::int64_t nkv = attention_kv_tiles_of(seq, qt);
  for (std::int64_t kt = 0; kt < nkv; ++kt) {
    const std::int64_t k0 = kt * kAttnBc, kn = attention_tile_len(k0, kAttnBc, seq);
    blk.sync();  // the previous tile's K, V and S are read
    attention_load_kv_tile<T, A>(blk, d, pr, qkv, k0, kn, K, V);
    blk.sync();
    blk.for_each(kAttnBr * kAttnBc, [&](int idx) {
      const int i = idx / kAttnBc, c = idx % kAttnBc;
      S[idx] = attention_visible(q0 + i, k0 + c, seq)
                   ? scale * attention_tile_dot(Q + i * hd, K + c * ld, hd)
                   : attention_neg_inf<A>();
    });
    blk.sync();
    blk.for_each(kAttnBr, [&](int i) {
      attention_online_softmax(S + i * kAttnBc, kAttnBc, M[i], L[i], Alpha[i]);
    });
    blk.sync();
    blk.for_each(int(kAttnBr * hd), [&](int idx) {
      const std::int64_t i = idx / hd, x = idx % hd;
      A acc = O[idx] * Alpha[i];
      for (int c = 0; c < kAttnBc; ++c) acc += S[i * kAttnBc + c] * V[c * ld + x];
      O[idx] = acc;
    });
  }
  blk.sync();
  T* o = out + pr.obase_off;
  blk.for_each(int(kAttnBr * hd), [&](int idx) {
    const std::int64_t i = idx / hd, x = idx % hd;
    if (i < qn) o[(q0 + i) * d.channels + x] = store<T>(O[idx] / L[i]);
  });
  blk.for_each(kAttnBr, [&](int i) {
    if (i < qn) lse[pair * seq + q0 + i] = M[i] + log_(L[i]);
  });
}

// P and dS of a (query tile, key/value tile) pair of tiles in shared memory:
// P = exp(q·k·scale - lse) (0 where masked), dS = P·(dout·v - D).
template <class A, class Block>
ZRT_HD void attention_tile_p_ds(const Block& blk, const AttentionDims& d, std::int64_t q0,
                                std::int64_t k0, A scale, const A* Q, const A* dO, const A* K,
                                const A* V, const A* Lse, const A* Dr, A* P, A* dS) {
  const std::int64_t hd = d.head_dim, ld = attention_kv_ld(hd);
  blk.for_each(kAttnBr * kAttnBc, [&](int idx) {
    const int i = idx / kAttnBc, c = idx % kAttnBc;
    if (!attention_visible(q0 + i, k0 + c, d.seq)) {
      P[idx] = 0;
      dS[idx] = 0;
      return;
    }
    const A p = exp_(scale * attention_tile_dot(Q + i * hd, K + c * ld, hd) - Lse[i]);
    P[idx] = p;
    dS[idx] = p * (attention_tile_dot(dO + i * hd, V + c * ld, hd) - Dr[i]);
  });
}

// Loads a query tile's q, dout, lse and D (zero past the sequence).
template <class T, class A, class Block>
ZRT_HD void attention_load_query_tile(const Block& blk, const AttentionDims& d,
                                      const AttentionPair& pr, std::int64_t pair, std::int64_t q0,
                                      std::int64_t qn, const T* qkv, const T* dout, const A* lse,
                                      const A* dsum, A* Q, A* dO, A* Lse, A* Dr) {
  attention_load_tile<T, A>(blk, Q, qkv + pr.base_off, pr.s3, q0, qn, kAttnBr, d.head_dim,
                            d.head_dim);
  attention_load_tile<T, A>(blk, dO, dout + pr.obase_off, d.channels, q0, qn, kAttnBr, d.head_dim,
                            d.head_dim);
  blk.for_each(kAttnBr, [&](int i) {
    Lse[i] = i < qn ? lse[pair * d.seq + q0 + i] : A(0);
    Dr[i] = i < qn ? dsum[pair * d.seq + q0 + i] : A(0);
  });
}

// dK and dV of key/value tile kt of pair `pair`; dsum holds D per row.
// smem: attention_backward_kv_smem(hd) elements.
template <class T, class A, class Block>
ZRT_HD void attention_backward_kv_tile(const Block& blk, const AttentionDims& d, std::int64_t pair,
                                       std::int64_t kt, const T* dout, const T* qkv, const A* lse,
                                       const A* dsum, T* dqkv, A* smem) {
  const std::int64_t hd = d.head_dim, seq = d.seq;
  const AttentionPair pr(d, pair);
  const A scale = A(1) / sqrt_(A(hd));
  const std::int64_t k0 = kt * kAttnBc, kn = attention_tile_len(k0, kAttnBc, seq);
  const std::int64_t ld = attention_kv_ld(hd);
  A* K = smem;
  A* V = K + kAttnBc * ld;
  A* dK = V + kAttnBc * ld;
  A* dV = dK + kAttnBc * hd;
  A* Q = dV + kAttnBc * hd;
  A* dO = Q + kAttnBr * hd;
  A* P = dO + kAttnBr * hd;
  A* dS = P + kAttnBr * kAttnBc;
  A* Lse = dS + kAttnBr * kAttnBc;
  A* Dr = Lse + kAttnBr;
  attention_load_kv_tile<T, A>(blk, d, pr, qkv, k0, kn, K, V);
  blk.for_each(int(kAttnBc * hd), [&](int idx) { dK[idx] = dV[idx] = 0; });
  const std::int64_t nq = attention_tiles(seq, kAttnBr);
  for (std::int64_t qt = attention_first_query_tile(kt); qt < nq; ++qt) {
    const std::int64_t q0 = qt * kAttnBr, qn = attention_tile_len(q0, kAttnBr, seq);
    blk.sync();  // the previous query tile is read
    attention_load_query_tile<T, A>(blk, d, pr, pair, q0, qn, qkv, dout, lse, dsum, Q, dO, Lse, Dr);
    blk.sync();
    attention_tile_p_ds(blk, d, q0, k0, scale, Q, dO, K, V, Lse, Dr, P, dS);
    blk.sync();
    blk.for_each(int(kAttnBc * hd), [&](int idx) {
      const std::int64_t c = idx / hd, x = idx % hd;
      A dv = dV[idx], dk = dK[idx];
      for (int i = 0; i < kAttnBr; ++i) {
        dv += P[i * kAttnBc + c] * dO[i * hd + x];
        dk += dS[i * kAttnBc + c] * Q[i * hd + x];
      }
      dV[idx] = dv;
      dK[idx] = dk;
    });
  }
  blk.sync();
  T* dk_out = dqkv + pr.base_off + d.channels;
  blk.for_each(int(kAttnBc * hd), [&](int idx) {
    const std::int64_t c = idx / hd, x = idx % hd;
    if (c < kn) {
      dk_out[(k0 + c) * pr.s3 + x] = store<T>(scale * dK[idx]);
      dk_out[(k0 + c) * pr.s3 + d.channels + x] = store<T>(dV[idx]);
    }
  });
}

// dQ of query tile qt of pair `pair`. smem: attention_backward_q_smem(hd).
template <class T, class A, class Block>
ZRT_HD void attention_backward_q_tile(const Block& blk, const AttentionDims& d, std::int64_t pair,
                                      std::int64_t qt, const T* dout, const T* qkv, const A* lse,
                                      const A* dsum, T* dqkv, A* smem) {
  const std::int64_t hd = d.head_dim, seq = d.seq;
  const AttentionPair pr(d, pair);
  const A scale = A(1) / sqrt_(A(hd));
  const std::int64_t q0 = qt * kAttnBr, qn = attention_tile_len(q0, kAttnBr, seq);
  const std::int64_t ld = attention_kv_ld(hd);
  A* Q = smem;
  A* dO = Q + kAttnBr * hd;
  A* dQ = dO + kAttnBr * hd;
  A* K = dQ + kAttnBr * hd;
  A* V = K + kAttnBc * ld;
  A* P = V + kAttnBc * ld;
  A* dS = P + kAttnBr * kAttnBc;
  A* Lse = dS + kAttnBr * kAttnBc;
  A* Dr = Lse + kAttnBr;
  attention_load_query_tile<T, A>(blk, d, pr, pair, q0, qn, qkv, dout, lse, dsum, Q, dO, Lse, Dr);
  blk.for_each(int(kAttnBr * hd), [&](int idx) { dQ[idx] = 0; });
  const std::int64_t nkv = attention_kv_tiles_of(seq, qt);
  for (std::int64_t kt = 0; kt < nkv; ++kt) {
    const std::int64_t k0 = kt * kAttnBc, kn = attention_tile_len(k0, kAttnBc, seq);
    blk.sync();  // the previous key/value tile is read
    attention_load_kv_tile<T, A>(blk, d, pr, qkv, k0, kn, K, V);
    blk.sync();
    attention_tile_p_ds(blk, d, q0, k0, scale, Q, dO, K, V, Lse, Dr, P, dS);
    blk.sync();
    blk.for_each(int(kAttnBr * hd), [&](int idx) {
      const std::int64_t i = idx / hd, x = idx % hd;
      A acc = dQ[idx];
      for (int c = 0; c < kAttnBc; ++c) acc += dS[i * kAttnBc + c] * K[c * ld + x];
      dQ[idx] = acc;
    });
  }
  blk.sync();
  T* dq = dqkv + pr.base_off;
  blk.for_each(int(kAttnBr * hd), [&](int idx) {
    const std::int64_t i = idx / hd, x = idx % hd;
    if (i < qn) dq[(q0 + i) * pr.s3 + x] = store<T>(scale * dQ[idx]);
  });
}

// Shared memory per block, in elements of A (Note [Tiled causal attention]).
ZRT_HD inline std::int64_t attention_forward_smem(std::int64_t hd) {
  return (2 * kAttnBr + 2 * kAttnBc) * hd + 2 * kAttnBc + kAttnBr * kAttnBc + 3 * kAttnBr;
}
ZRT_HD inline std::int64_t attention_backward_kv_smem(std::int64_t hd) {
  return (2 * kAttnBr + 4 * kAttnBc) * hd + 2 * kAttnBc + 2 * kAttnBr * kAttnBc + 2 * kAttnBr;
}
ZRT_HD inline std::int64_t attention_backward_q_smem(std::int64_t hd) {
  return (3 * kAttnBr + 2 * kAttnBc) * hd + 2 * kAttnBc + 2 * kAttnBr * kAttnBc + 2 * kAttnBr;
}

// The host's block: one thread running every index in order.
struct AttentionHostBlock {
  template <class F>
  void for_each(int n, const F& f) const {
    for (int i = 0; i < n; ++i) f(i);
  }
  void sync() const {}
};

// Host emulations of the fast CUDA kernels: the same tile functions, blocks
// in grid order, on one thread. Their shared memory starts as NaN, as a
// block's holds whatever it held: a read of an element no step wrote (the K
// and V rows' padding, a carve-up off by one) turns the results NaN.
template <class A>
std::vector<A> attention_host_smem(std::int64_t elements) {
  return std::vector<A>(static_cast<std::size_t>(elements), static_cast<A>(NAN));
}

template <class T, class A>
void attention_forward_tiled_host(const AttentionDims& d, const T* qkv, T* out, A* lse) {
  std::vector<A> smem = attention_host_smem<A>(attention_forward_smem(d.head_dim));
  const std::int64_t nq = attention_tiles(d.seq, kAttnBr);
  for (std::int64_t pair = 0; pair < d.batch * d.heads; ++pair)
    for (std::int64_t qt = 0; qt < nq; ++qt)
      attention_forward_tile<T, A>(AttentionHostBlock{}, d, pair, qt, qkv, out, lse, smem.data());
}

template <class T, class A>
void attention_backward_tiled_host(const AttentionDims& d, const T* dout, const T* qkv,
                                   const T* out, const A* lse, T* dqkv) {
  const std::int64_t rows = d.batch * d.heads * d.seq;
  std::vector<A> dsum(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const AttentionRow row(d, r);
    const std::int64_t off = (row.b * d.seq + row.t) * d.channels + row.h * d.head_dim;
    dsum[r] = attention_dot<T, A>(dout + off, out + off, d.head_dim);
  }
  std::vector<A> kv_smem = attention_host_smem<A>(attention_backward_kv_smem(d.head_dim));
  std::vector<A> q_smem = attention_host_smem<A>(attention_backward_q_smem(d.head_dim));
  const std::int64_t nq = attention_tiles(d.seq, kAttnBr), nk = attention_tiles(d.seq, kAttnBc);
  for (std::int64_t pair = 0; pair < d.batch * d.heads; ++pair) {
    for (std::int64_t kt = 0; kt < nk; ++kt)
      attention_backward_kv_tile<T, A>(AttentionHostBlock{}, d, pair, kt, dout, qkv, lse,
                                       dsum.data(), dqkv, kv_smem.data());
    for (std::int64_t qt = 0; qt < nq; ++qt)
      attention_backward_q_tile<T, A>(AttentionHostBlock{}, d, pair, qt, dout, qkv, lse,
                                      dsum.data(), dqkv, q_smem.data());
  }
}

}  // namespace zrt::kernels
