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
  const A scale = attention_scale<A>(hd);
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

// What both backward kernels hold for pair `pair`: its bases, the score
// scale and the tiles in shared memory: a query tile's Q, dO, lse and D, a
// key/value tile's K and V (rows attention_kv_ld apart), and their P and
// dS; the kernel's own accumulators follow at `acc`.
template <class A>
struct AttentionBackwardTiles {
  AttentionPair pr;
  A scale;
  A *Q, *dO, *K, *V, *P, *dS, *Lse, *Dr, *acc;
  ZRT_HD AttentionBackwardTiles(const AttentionDims& d, std::int64_t pair, A* smem)
      : pr(d, pair),
        scale(attention_scale<A>(d.head_dim)),
        Q(smem),
        dO(Q + kAttnBr * d.head_dim),
        K(dO + kAttnBr * d.head_dim),
        V(K + kAttnBc * attention_kv_ld(d.head_dim)),
        P(V + kAttnBc * attention_kv_ld(d.head_dim)),
        dS(P + kAttnBr * kAttnBc),
        Lse(dS + kAttnBr * kAttnBc),
        Dr(Lse + kAttnBr),
        acc(Dr + kAttnBr) {}
};

// Loads a query tile's q, dout, lse and D (zero past the sequence).
template <class T, class A, class Block>
ZRT_HD void attention_load_query_tile(const Block& blk, const AttentionBackwardArgs<T, A>& a,
                                      const AttentionBackwardTiles<A>& s, std::int64_t q0,
                                      std::int64_t qn) {
  const AttentionDims& d = a.d;
  const std::int64_t hd = d.head_dim, row0 = s.pr.lse_off + q0;
  attention_load_tile<T, A>(blk, s.Q, a.qkv + s.pr.base_off, s.pr.s3, q0, qn, kAttnBr, hd, hd);
  attention_load_tile<T, A>(blk, s.dO, a.dout + s.pr.obase_off, d.channels, q0, qn, kAttnBr, hd,
                            hd);
  blk.for_each(kAttnBr, [&](int i) {
    s.Lse[i] = i < qn ? a.lse[row0 + i] : A(0);
    s.Dr[i] = i < qn ? a.dsum[row0 + i] : A(0);
  });
}

// One step of a backward kernel's walk over the other side's tiles: once
// the previous step's tiles are read, `load` fills the walked tile; then P
// and dS of the query tile from q0 and the key/value tile from k0:
// P = exp(q·k·scale - lse) (0 where masked), dS = P·(dout·v - D).
template <class A, class Block, class Load>
ZRT_HD void attention_backward_step(const Block& blk, const AttentionDims& d,
                                    const AttentionBackwardTiles<A>& s, std::int64_t q0,
                                    std::int64_t k0, const Load& load) {
  const std::int64_t hd = d.head_dim, ld = attention_kv_ld(hd);
  blk.sync();
  load();
  blk.sync();
  blk.for_each(kAttnBr * kAttnBc, [&](int idx) {
    const int i = idx / kAttnBc, c = idx % kAttnBc;
    if (!attention_visible(q0 + i, k0 + c, d.seq)) {
      s.P[idx] = 0;
      s.dS[idx] = 0;
      return;
    }
    const A p = exp_(s.scale * attention_tile_dot(s.Q + i * hd, s.K + c * ld, hd) - s.Lse[i]);
    s.P[idx] = p;
    s.dS[idx] = p * (attention_tile_dot(s.dO + i * hd, s.V + c * ld, hd) - s.Dr[i]);
  });
  blk.sync();
}

// Stores factor·src, rows [0, n) of a tile of `rows` rows of hd, to rows
// [r0, r0 + n) of dst (rows `stride` apart): attention_load_tile's inverse.
template <class T, class A, class Block>
ZRT_HD void attention_store_tile(const Block& blk, T* dst, std::int64_t stride, std::int64_t r0,
                                 std::int64_t n, int rows, std::int64_t hd, const A* src,
                                 A factor) {
  blk.for_each(int(rows * hd), [&](int idx) {
    const std::int64_t i = idx / hd, x = idx % hd;
    if (i < n) dst[(r0 + i) * stride + x] = store<T>(factor * src[idx]);
  });
}

// dK and dV of key/value tile kt of pair `pair`; a.dsum holds D per row.
// smem: attention_backward_kv_smem(hd) elements.
template <class T, class A, class Block>
ZRT_HD void attention_backward_kv_tile(const Block& blk, const AttentionBackwardArgs<T, A>& a,
                                       std::int64_t pair, std::int64_t kt, A* smem) {
  const AttentionDims& d = a.d;
  const AttentionBackwardTiles<A> s(d, pair, smem);
  const std::int64_t hd = d.head_dim, k0 = kt * kAttnBc;
  const std::int64_t kn = attention_tile_len(k0, kAttnBc, d.seq);
  A* dK = s.acc;
  A* dV = dK + kAttnBc * hd;
  attention_load_kv_tile<T, A>(blk, d, s.pr, a.qkv, k0, kn, s.K, s.V);
  blk.for_each(int(kAttnBc * hd), [&](int idx) { dK[idx] = dV[idx] = 0; });
  const std::int64_t nq = attention_tiles(d.seq, kAttnBr);
  for (std::int64_t qt = attention_first_query_tile(kt); qt < nq; ++qt) {
    const std::int64_t q0 = qt * kAttnBr, qn = attention_tile_len(q0, kAttnBr, d.seq);
    attention_backward_step(blk, d, s, q0, k0,
                            [&] { attention_load_query_tile<T, A>(blk, a, s, q0, qn); });
    blk.for_each(int(kAttnBc * hd), [&](int idx) {
      const std::int64_t c = idx / hd, x = idx % hd;
      A dv = dV[idx], dk = dK[idx];
      for (int i = 0; i < kAttnBr; ++i) {
        dv += s.P[i * kAttnBc + c] * s.dO[i * hd + x];
        dk += s.dS[i * kAttnBc + c] * s.Q[i * hd + x];
      }
      dV[idx] = dv;
      dK[idx] = dk;
    });
  }
  blk.sync();
  T* dk_out = a.dqkv + s.pr.base_off + d.channels;
  attention_store_tile<T>(blk, dk_out, s.pr.s3, k0, kn, kAttnBc, hd, dK, s.scale);
  attention_store_tile<T>(blk, dk_out + d.channels, s.pr.s3, k0, kn, kAttnBc, hd, dV, A(1));
}

// dQ of query tile qt of pair `pair`. smem: attention_backward_q_smem(hd).
template <class T, class A, class Block>
ZRT_HD void attention_backward_q_tile(const Block& blk, const AttentionBackwardArgs<T, A>& a,
                                      std::int64_t pair, std::int64_t qt, A* smem) {
  const AttentionDims& d = a.d;
  const AttentionBackwardTiles<A> s(d, pair, smem);
  const std::int64_t hd = d.head_dim, ld = attention_kv_ld(hd), q0 = qt * kAttnBr;
  const std::int64_t qn = attention_tile_len(q0, kAttnBr, d.seq);
  A* dQ = s.acc;
  attention_load_query_tile<T, A>(blk, a, s, q0, qn);
  blk.for_each(int(kAttnBr * hd), [&](int idx) { dQ[idx] = 0; });
  const std::int64_t nkv = attention_kv_tiles_of(d.seq, qt);
  for (std::int64_t kt = 0; kt < nkv; ++kt) {
    const std::int64_t k0 = kt * kAttnBc, kn = attention_tile_len(k0, kAttnBc, d.seq);
    attention_backward_step(blk, d, s, q0, k0, [&] {
      attention_load_kv_tile<T, A>(blk, d, s.pr, a.qkv, k0, kn, s.K, s.V);
    });
    blk.for_each(int(kAttnBr * hd), [&](int idx) {
      const std::int64_t i = idx / hd, x = idx % hd;
      A acc = dQ[idx];
      for (int c = 0; c < kAttnBc; ++c) acc += s.dS[i * kAttnBc + c] * s.K[c * ld + x];
      dQ[idx] = acc;
    });
  }
  blk.sync();
  attention_store_tile<T>(blk, a.dqkv + s.pr.base_off, s.pr.s3, q0, qn, kAttnBr, hd, dQ, s.scale);
}

// Shared memory per block, in elements of A (Note [Tiled causal attention]):
// the backward's AttentionBackwardTiles, then dK and dV or dQ.
ZRT_HD inline std::int64_t attention_forward_smem(std::int64_t hd) {
  return (2 * kAttnBr + 2 * kAttnBc) * hd + 2 * kAttnBc + kAttnBr * kAttnBc + 3 * kAttnBr;
}
ZRT_HD inline std::int64_t attention_backward_tiles_smem(std::int64_t hd) {
  return 2 * kAttnBr * hd + 2 * kAttnBc * attention_kv_ld(hd) + 2 * kAttnBr * kAttnBc + 2 * kAttnBr;
}
ZRT_HD inline std::int64_t attention_backward_kv_smem(std::int64_t hd) {
  return attention_backward_tiles_smem(hd) + 2 * kAttnBc * hd;
}
ZRT_HD inline std::int64_t attention_backward_q_smem(std::int64_t hd) {
  return attention_backward_tiles_smem(hd) + kAttnBr * hd;
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
  for (std::int64_t r = 0; r < rows; ++r) dsum[r] = attention_row_dsum<T, A>(d, r, dout, out);
  std::vector<A> kv_smem = attention_host_smem<A>(attention_backward_kv_smem(d.head_dim));
  std::vector<A> q_smem = attention_host_smem<A>(attention_backward_q_smem(d.head_dim));
  const AttentionBackwardArgs<T, A> a(d, dout, qkv, out, lse, dsum.data(), dqkv);
  const std::int64_t nq = attention_tiles(d.seq, kAttnBr), nk = attention_tiles(d.seq, kAttnBc);
  for (std::int64_t pair = 0; pair < d.batch * d.heads; ++pair) {
    for (std::int64_t kt = 0; kt < nk; ++kt)
      attention_backward_kv_tile<T, A>(AttentionHostBlock{}, a, pair, kt, kv_smem.data());
    for (std::int64_t qt = 0; qt < nq; ++qt)
      attention_backward_q_tile<T, A>(AttentionHostBlock{}, a, pair, qt, q_smem.data());
  }
}

}  // namespace zrt::kernels
