// The model-zoo ops, forward and backward, each registered once (Note [One
// registration per op]): within 1e-4 (f32, f64) or 1e-2 (bf16, f16) of
// 1 + max |reference| between CUDA and the CPU twin and between the fast
// kernels and their simple references, the embedding gradient's grouping bit
// for bit. Odd sizes (not multiples of the packs, warps or tiles) beside
// aligned ones.
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "tests/kernels/op_registry.h"
#include "zrt/kernels/nn/activation.h"
#include "zrt/kernels/nn/attention.h"
#include "zrt/kernels/nn/batched_gemm.h"
#include "zrt/kernels/nn/causal_softmax.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/embedding.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/gemm_epilogue.h"
#include "zrt/kernels/nn/layernorm.h"
#include "zrt/kernels/nn/nn_checks.h"
#include "zrt/kernels/nn/residual_add.h"

namespace zrt::test {

namespace {

using kernels::acc_dtype;

const std::vector<DType> kNnFloats = {DType::f32, DType::bf16};
const std::vector<OpDims> kNnLengths = {{1}, {7}, {8}, {1031}, {65537}};

double bytes(double elements, DType t) { return elements * double(dtype_size(t)); }

// GEMM cost: 2·m·n·k FLOPs.
OpCost gemm_cost(double m, double n, double k, DType t) {
  return {bytes(m * k + k * n + 2 * m * n, t), 2 * m * n * k};
}

// An elementwise op on two inputs of d[0] elements, moving `moved` elements
// of its dtype per element.
OpRegistration elementwise(std::string name, std::function<void(OpRun&, const OpDims&, DType)> run,
                           double moved) {
  return {
      .name = std::move(name),
      .dims = kNnLengths,
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            return std::vector{uniform({d[0]}, t, g), uniform({d[0]}, t, g)};
          },
      .run = std::move(run),
      .tolerance = nn_tolerance,
      .cost = [moved](const OpDims& d, DType t) { return OpCost{bytes(moved * double(d[0]), t)}; },
      .perf_dims = {std::int64_t(1) << 24},
  };
}

OpRegistration activation(kernels::Activation act, const char* name) {
  return elementwise(
      name,
      [act](OpRun& r, const OpDims& d, DType t) {
        kernels::activation_forward(act, r.in(0), r.out("y", {d[0]}, t), r.stream());
        kernels::activation_backward(act, r.in(0), r.in(1), r.out("dx", {d[0]}, t), r.stream());
      },
      5.0);
}

// A cross-entropy op's inputs: logits of rows × cols and a target per row in
// [-1, vocab) of dtype `ids` (-1: ignored).
std::vector<Tensor> logits_and_targets(std::int64_t rows, std::int64_t cols, std::int64_t vocab,
                                       DType t, DType ids, std::mt19937_64& g) {
  return std::vector{uniform({rows, cols}, t, g), integers({rows}, ids, g, -1, vocab - 1)};
}

}  // namespace

std::vector<OpRegistration> nn_registrations() {
  std::vector<OpRegistration> r;

  // dims: {m, n, k, transposes (bit 0: a, bit 1: b)}; c = 0.5 a·b + c.
  r.push_back({
      .name = "gemm",
      .dims =
          {{39, 23, 71, 0}, {39, 23, 71, 1}, {39, 23, 71, 2}, {39, 23, 71, 3}, {64, 128, 256, 2}},
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            const std::int64_t m = d[0], n = d[1], k = d[2];
            return std::vector{uniform(d[3] & 1 ? Shape{k, m} : Shape{m, k}, t, g),
                               uniform(d[3] & 2 ? Shape{n, k} : Shape{k, n}, t, g),
                               uniform({m, n}, t, g)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType) {
            kernels::gemm(r.in(0), d[3] & 1, r.in(1), d[3] & 2, r.inout("c", 2), 0.5, 1.0,
                          r.stream());
          },
      .tolerance = nn_tolerance,
      .cuda_misaligned = false,
      .cost = [](const OpDims& d, DType t) { return gemm_cost(d[0], d[1], d[2], t); },
      .perf_dims = {1024, 1024, 1024, 2},
  });

  // dims: {m, n, k, trans_w}: Linear's bias and GPT's MLP GELU, in the
  // cuBLASLt epilogue where it fits (Note [GEMM epilogues]).
  r.push_back({
      .name = "gemm_bias",
      .dims = {{64, 128, 256, 0},
               {64, 128, 256, 1},
               {37, 24, 13, 1},
               {33, 19, 45, 0},
               {1, 8, 1, 1},
               {5, 3, 0, 0}},
      .dtypes = {DType::f32, DType::bf16, DType::f16},
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            const std::int64_t m = d[0], n = d[1], k = d[2];
            return std::vector{uniform({m, k}, t, g),
                               uniform(d[3] ? Shape{n, k} : Shape{k, n}, t, g), uniform({n}, t, g),
                               Tensor::full({m}, 1.0, t)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            const std::int64_t m = d[0], n = d[1];
            kernels::gemm_bias(r.in(0), r.in(1), d[3], r.in(2), r.in(3), r.out("y", {m, n}, t),
                               r.stream());
            kernels::gemm_bias_gelu(r.in(0), r.in(1), d[3], r.in(2), r.in(3),
                                    r.out("pre", {m, n}, t), r.out("gelu", {m, n}, t), r.stream());
          },
      .tolerance = nn_tolerance,
      .cost =
          [](const OpDims& d, DType t) {
            OpCost c = gemm_cost(d[0], d[1], d[2], t);
            return OpCost{2 * c.bytes, 2 * c.flops};
          },
      .perf_dims = {1024, 3072, 768, 1},
  });

  // dims: {transposes, c in the accumulation dtype}: attention's layouts, B
  // elements of H heads side by side in rows, [T, hd] · [hd, T] -> [T, T].
  r.push_back({
      .name = "batched_gemm",
      .dims = {{0, 0}, {1, 0}, {2, 1}, {3, 1}},
      .dtypes = {DType::f32, DType::bf16, DType::f16, DType::f64},
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            const std::int64_t b = 3, h = 4, tl = 37, hd = 24, c = h * hd;
            const std::int64_t lda = d[0] & 1 ? h * tl : c, ldb = d[0] & 2 ? c : h * tl;
            return std::vector{uniform({b * (d[0] & 1 ? hd : tl) * lda}, t, g),
                               uniform({b * (d[0] & 2 ? tl : hd) * ldb}, t, g),
                               uniform({b * h * tl * tl}, d[1] ? acc_dtype(t) : t, g)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType) {
            const std::int64_t b = 3, h = 4, tl = 37, hd = 24, c = h * hd;
            kernels::BatchedGemm g;
            g.trans_a = d[0] & 1, g.trans_b = d[0] & 2;
            g.m = tl, g.n = tl, g.k = hd;
            g.outer = b, g.inner = h;
            const std::int64_t lda = g.trans_a ? h * tl : c, ldb = g.trans_b ? c : h * tl;
            g.a = {lda, (g.trans_a ? hd : tl) * lda, g.trans_a ? tl : hd};
            g.b = {ldb, (g.trans_b ? tl : hd) * ldb, g.trans_b ? hd : tl};
            g.c = {tl, h * tl * tl, tl * tl};
            g.alpha = 0.5, g.beta = 1.0;
            kernels::batched_gemm(r.in(0), r.in(1), r.inout("c", 2), g, r.stream());
          },
      .tolerance = nn_tolerance,
      .cuda_misaligned = false,
      .cost = [](const OpDims&, DType t) { return gemm_cost(37, 37, 24, t); },
  });

  r.push_back(activation(kernels::Activation::gelu, "gelu"));
  r.push_back(activation(kernels::Activation::relu, "relu"));

  r.push_back(elementwise(
      "residual_add",
      [](OpRun& r, const OpDims& d, DType t) {
        kernels::residual_add(r.in(0), r.in(1), r.out("out", {d[0]}, t), r.stream());
      },
      3.0));

  // dims: {rows, C, accumulate the parameter gradients}: C not a multiple
  // of 32, rows across several of the fast gradients' tiles; C a multiple of
  // every pack (776: the last block of features part-full) or of f32's alone
  // (100), for the packed gradient pass.
  r.push_back({
      .name = "layernorm",
      .dims = {{37, 71, 0},
               {1, 5, 1},
               {1237, 771, 0},
               {9001, 33, 1},
               {64, 768, 1},
               {1237, 776, 1},
               {300, 100, 0}},
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            const std::int64_t rows = d[0], c = d[1];
            return std::vector{uniform({rows, c}, t, g), uniform({c}, t, g), uniform({c}, t, g),
                               uniform({rows, c}, t, g), uniform({c}, t, g), uniform({c}, t, g)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            const std::int64_t rows = d[0], c = d[1];
            const DType at = acc_dtype(t);
            const Tensor mean = r.out("mean", {rows}, at), rstd = r.out("rstd", {rows}, at);
            kernels::layernorm_forward(r.in(0), r.in(1), r.in(2), r.out("y", {rows, c}, t), mean,
                                       rstd, 1e-5, r.stream());
            const bool acc = d[2] != 0;
            const Tensor dw = acc ? r.inout("dweight", 4) : r.out("dweight", {c}, t);
            const Tensor db = acc ? r.inout("dbias", 5) : r.out("dbias", {c}, t);
            kernels::layernorm_backward(r.in(3), r.in(0), r.in(1), mean, rstd,
                                        r.out("dx", {rows, c}, t), dw, db, acc, r.stream());
          },
      .tolerance = nn_tolerance,
      .cuda_misaligned = false,
      .cost =
          [](const OpDims& d, DType t) {
            return OpCost{bytes(6.0 * double(d[0] * d[1]), t)};  // x, y; dy, x, dx and x again
          },
      .perf_dims = {8192, 768, 1},
  });

  // dims: {B, T, C, H}: T under a tile, past several, head dims 16 to 128
  // (the flash kernels': 16 and 128 over several tiles and a partial one;
  // 128 is the one above the default 48 KiB of shared memory).
  r.push_back({
      .name = "attention",
      .dims = {{1, 1, 16, 1},
               {2, 23, 24, 3},
               {1, 33, 64, 2},
               {2, 64, 64, 1},
               {2, 97, 32, 2},
               {3, 97, 96, 3},
               {1, 130, 128, 2},
               {1, 130, 256, 2},
               {2, 256, 768, 12}},
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            return std::vector{uniform({d[0], d[1], 3 * d[2]}, t, g),
                               uniform({d[0], d[1], d[2]}, t, g)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            const std::int64_t b = d[0], seq = d[1], c = d[2], h = d[3];
            const Tensor out = r.out("out", {b, seq, c}, t),
                         lse = r.out("lse", {b, h, seq}, acc_dtype(t));
            kernels::attention_forward(r.in(0), out, lse, h, r.stream());
            kernels::attention_backward(r.in(1), r.in(0), out, lse,
                                        r.out("dqkv", {b, seq, 3 * c}, t), h, r.stream());
          },
      .tolerance = nn_tolerance,
      // Every path (Note [Attention paths]); flash falls back to the default
      // where it has no kernels, which must agree too.
      .extra_paths = {{"cpu gemm path", false, 0, kernels::AttentionPath::gemm},
                      {"cuda tiled", true, 0, kernels::AttentionPath::tiled},
                      {"cuda gemm", true, 0, kernels::AttentionPath::gemm},
                      {"cuda flash", true, 0, kernels::AttentionPath::flash}},
      .cuda_misaligned = false,
      .cost =
          [](const OpDims& d, DType t) {
            // Causal: half of the forward's 4·B·T²·C and the backward's 2.5x that.
            const double fwd = 2.0 * double(d[0]) * double(d[1]) * double(d[1]) * double(d[2]);
            return OpCost{bytes(7.0 * double(d[0] * d[1] * d[2]), t), 3.5 * fwd};
          },
      .perf_dims = {2, 1024, 768, 12},
  });

  // dims: {pairs, T}: the GEMM path's softmax between its products.
  r.push_back({
      .name = "causal_softmax",
      .dims = {{5, 1}, {5, 31}, {5, 33}, {5, 300}},
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            const Shape sq = {d[0], d[1], d[1]};
            return std::vector{uniform(sq, acc_dtype(t), g), uniform(sq, acc_dtype(t), g)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            const Shape sq = {d[0], d[1], d[1]};
            const Tensor p = r.out("probs", sq, t), lse = r.out("lse", {d[0], d[1]}, acc_dtype(t));
            kernels::causal_softmax_forward(r.in(0), p, lse, r.stream());
            kernels::causal_softmax_recompute(r.in(0), lse, r.out("recomputed", sq, t), r.stream());
            Tensor ds = r.out("dscores", sq, t);  // in place, as the GEMM path runs it
            ds.copy_(p, r.stream());
            kernels::causal_softmax_backward(ds, r.in(1), ds, r.stream());
          },
      .tolerance = nn_tolerance,
      .cuda_misaligned = false,
      .cost = [](const OpDims& d,
                 DType t) { return OpCost{bytes(6.0 * double(d[0] * d[1] * d[1]), t)}; },
      .perf_dims = {48, 1024},
  });

  // dims: {B, T, V, C, distinct tokens, accumulate, i64 ids}: many repeats,
  // V much larger than the tokens, a table past 2^k rows.
  r.push_back({
      .name = "embedding",
      .dims = {{1, 1, 1, 3, 1, 0, 0},
               {3, 7, 5, 9, 3, 1, 1},
               {2, 33, 50257, 5, 11, 0, 1},
               {5, 129, 1000, 17, 1000, 1, 0},
               {4, 61, 4097, 8, 2, 0, 0}},
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            const std::int64_t b = d[0], seq = d[1], v = d[2], c = d[3];
            Tensor ids = integers({b, seq}, DType::i64, g, 0, d[4] - 1);
            for (std::int64_t i = 0; i < ids.numel(); ++i)
              ids.set_item(i, double((std::int64_t(ids.item(i)) * 7919) % v));
            return std::vector{ids.to(d[6] ? DType::i64 : DType::i32),
                               uniform({v, c}, t, g),
                               uniform({seq + 2, c}, t, g),
                               uniform({b, seq, c}, t, g),
                               uniform({v, c}, t, g),
                               uniform({seq + 2, c}, t, g)};
          },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            const std::int64_t b = d[0], seq = d[1], v = d[2], c = d[3];
            const bool acc = d[5] != 0;
            const Tensor& wpe = r.in(2);
            kernels::embedding_forward(r.in(0), r.in(1), &wpe, r.out("out", {b, seq, c}, t),
                                       r.stream());
            const Tensor dwte = acc ? r.inout("dwte", 4) : r.out("dwte", {v, c}, t);
            const Tensor dwpe = acc ? r.inout("dwpe", 5) : r.out("dwpe", {seq + 2, c}, t);
            kernels::embedding_backward(r.in(0), r.in(3), dwte, &dwpe, acc, r.stream());
          },
      // The device grouping sums each token's positions in the host's order.
      .tolerance =
          [](DType t) {
            return OpTolerance{nn_tolerance(t).twin, 0};
          },
      .cuda_misaligned = false,
      .cost = [](const OpDims& d,
                 DType t) { return OpCost{bytes(6.0 * double(d[0] * d[1] * d[3]), t)}; },
      .perf_dims = {8, 1024, 8192, 768, 8192, 1, 0},
  });

  // dims: {rows, vocab}; targets include -1 (ignored). 20011 rows span
  // several blocks of the fast mean.
  r.push_back({
      .name = "cross_entropy",
      .dims = {{9, 1031}, {1, 67}, {333, 67}, {20011, 67}},
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            return logits_and_targets(d[0], d[1], d[1], t, DType::i32, g);
          },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            const std::int64_t rows = d[0];
            const Tensor lse = r.out("lse", {rows}, DType::f32);
            kernels::cross_entropy_forward(r.in(0), r.in(1), 7.0,
                                           r.out("losses", {rows}, DType::f32), lse,
                                           r.out("loss", {1}, DType::f32), r.stream());
            kernels::cross_entropy_backward(r.in(0), r.in(1), lse, 1.5, 7.0,
                                            r.out("dlogits", {rows, d[1]}, t), r.stream());
          },
      .tolerance = nn_tolerance,
      .cuda_misaligned = false,
      .cost = [](const OpDims& d, DType t) { return OpCost{bytes(3.0 * double(d[0] * d[1]), t)}; },
      .perf_dims = {1024, 50304},
  });

  // dims: {rows, vocab, padded columns, in place, masked} (Note [Fused
  // classifier]): the padded columns' gradient is exactly 0. masked: some
  // logits are -inf, the first column's of every other row among them (a
  // lane starts its running max there), and add nothing to their row.
  r.push_back({
      .name = "cross_entropy_fused",
      .dims = {{9, 1031, 1152, 0, 0},
               {9, 1031, 1152, 1, 0},
               {333, 67, 67, 1, 0},
               {9, 1031, 1152, 0, 1}},
      .dtypes = kNnFloats,
      .make_inputs =
          [](const OpDims& d, DType t, std::mt19937_64& g) {
            std::vector<Tensor> in = logits_and_targets(d[0], d[2], d[1], t, DType::i64, g);
            if (d[4])
              for (std::int64_t row = 0; row < d[0]; row += 2) {
                for (const std::int64_t col : {std::int64_t{0}, std::int64_t{1}, 33 + row})
                  in[0].set_item(row * d[2] + col, -INFINITY);
                in[1].set_item(row, 2);  // a target that is not masked: a finite loss
              }
            return in;
          },
      .run =
          [](OpRun& r, const OpDims& d, DType t) {
            const std::int64_t rows = d[0];
            const Tensor losses = r.out("losses", {rows}, DType::f32),
                         loss = r.out("loss", {1}, DType::f32);
            const Tensor logits = d[3] ? r.inout("dlogits", 0) : r.in(0);
            const Tensor dlogits = d[3] ? logits : r.out("dlogits", {rows, d[2]}, t);
            kernels::cross_entropy_fused(logits, r.in(1), d[1], 7.0, 1.5, losses, loss, dlogits,
                                         r.stream());
          },
      .tolerance = nn_tolerance,
      .cuda_misaligned = false,
      .invariant = [](const std::vector<std::pair<std::string, Tensor>>& outs, const OpDims& d,
                      DType) -> std::string {
        const Tensor& dl = outs[2].second;
        for (std::int64_t row = 0; row < d[0]; ++row)
          for (std::int64_t i = d[1]; i < d[2]; ++i)
            if (dl.item(row * d[2] + i) != 0.0) return "a padded column's gradient is not 0";
        return {};
      },
      .cost = [](const OpDims& d, DType t) { return OpCost{bytes(2.0 * double(d[0] * d[2]), t)}; },
      .perf_dims = {1024, 50257, 50304, 1},
  });
  return r;
}

}  // namespace zrt::test
