// The fused classifier (Note [Fused classifier] in kernels/nn/cross_entropy.h)
// on the CPU: bit for bit the unfused forward and backward (the twin shares
// their arithmetic), in place or not; within a stated tolerance of a float64
// reference; padded columns (Note [Padded vocabulary]) out of the loss with
// an exact zero gradient; ignored (negative) targets; odd vocabularies;
// f32, bf16 and f64.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/nn_checks.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

struct Result {
  Tensor losses, loss, dlogits;
};

Result fused(const Tensor& logits, const Tensor& targets, std::int64_t vocab, double normaliser,
             double dloss, bool in_place = false) {
  const DType acc = acc_dtype(logits.dtype());
  const std::int64_t rows = logits.size(0);
  Result r{Tensor::full({rows}, NAN, acc), Tensor::full({1}, NAN, acc),
           in_place ? logits : Tensor::full(logits.shape(), NAN, logits.dtype())};
  cross_entropy_fused(logits, targets, vocab, normaliser, dloss, r.losses, r.loss, r.dlogits);
  return r;
}

Result unfused(const Tensor& logits, const Tensor& targets, double normaliser, double dloss) {
  const DType acc = acc_dtype(logits.dtype());
  const std::int64_t rows = logits.size(0);
  Result r{Tensor::full({rows}, NAN, acc), Tensor::full({1}, NAN, acc),
           Tensor::full(logits.shape(), NAN, logits.dtype())};
  Tensor lse = Tensor::full({rows}, NAN, acc);
  cross_entropy_forward(logits, targets, normaliser, r.losses, lse, r.loss);
  cross_entropy_backward(logits, targets, lse, dloss, normaliser, r.dlogits);
  return r;
}

// [rows, cols] logits in [-4, 4) (in `dtype`), and targets in [-1, vocab):
// about one in eight ignored, the first row's the last class.
std::pair<Tensor, Tensor> random_case(std::int64_t rows, std::int64_t cols, std::int64_t vocab,
                                      DType dtype, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> x(-4.0, 4.0);
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  std::vector<double> lv(static_cast<std::size_t>(rows * cols)), tv(static_cast<std::size_t>(rows));
  for (auto& v : lv) v = x(gen);
  for (auto& t : tv) t = gen() % 8 == 0 ? -1.0 : static_cast<double>(pick(gen));
  tv[0] = static_cast<double>(vocab - 1);
  return {Tensor::from_doubles(lv, dtype).view({rows, cols}), Tensor::from_doubles(tv, DType::i64)};
}

// The columns [0, vocab) of logits, as a tensor of their own.
Tensor first_columns(const Tensor& logits, std::int64_t vocab) {
  const std::int64_t rows = logits.size(0), cols = logits.size(1);
  Tensor out = Tensor::empty({rows, vocab}, logits.dtype());
  for (std::int64_t r = 0; r < rows; ++r)
    out.narrow(r, 1).copy_(logits.flatten().slice(r * cols, vocab).view({1, vocab}));
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.to_doubles() == b.to_doubles();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fused_classifier)

// Exactly equal, not within a tolerance: the CPU twin takes each row's
// statistics and gradient with the unfused twins' arithmetic.
BOOST_AUTO_TEST_CASE(is_the_unfused_loss_and_gradient_bit_for_bit) {
  auto gen = test::fresh_generator();
  for (DType dtype : {DType::f32, DType::bf16, DType::f64})
    for (std::int64_t vocab : {std::int64_t(1), std::int64_t(37), std::int64_t(203)}) {
      BOOST_TEST_CONTEXT(dtype_name(dtype) << " vocab " << vocab) {
        auto [logits, targets] = random_case(13, vocab, vocab, dtype, gen);
        const Result want = unfused(logits, targets, 17.0, 0.75);
        const Result got = fused(logits, targets, 0, 17.0, 0.75);
        BOOST_TEST(same_bits(got.losses, want.losses));
        BOOST_TEST(same_bits(got.loss, want.loss));
        BOOST_TEST(same_bits(got.dlogits, want.dlogits));
        const Tensor copy = logits.clone();
        const Result in_place = fused(copy, targets, vocab, 17.0, 0.75, /*in_place=*/true);
        BOOST_TEST(in_place.dlogits.shares_storage(copy));
        BOOST_TEST(same_bits(in_place.loss, want.loss));
        BOOST_TEST(same_bits(in_place.dlogits, want.dlogits));
      }
    }
}

// Against a float64 reference over the logits as stored. Tolerances: the
// loss 1e-12 (f64) or 2e-6 (f32 statistics, also of bf16 logits) relative;
// the gradient 1e-12 (f64), 1e-6 (f32) or 2^-8 (bf16's rounding) of the
// largest |gradient| of the reference.
BOOST_AUTO_TEST_CASE(matches_a_float64_reference) {
  auto gen = test::fresh_generator();
  const double normaliser = 29.0, dloss = 1.25;
  for (DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    const double loss_tol = dtype == DType::f64 ? 1e-12 : 2e-6;
    const double grad_tol = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-6 : 1.0 / 256;
    const std::int64_t rows = 21, vocab = 203, cols = 256;  // padded, as a GPT's head
    BOOST_TEST_CONTEXT(dtype_name(dtype)) {
      auto [logits, targets] = random_case(rows, cols, vocab, dtype, gen);
      const Result got = fused(logits, targets, vocab, normaliser, dloss);
      const std::vector<double> x = logits.to_doubles(), g = got.dlogits.to_doubles();
      std::vector<double> want_grad(x.size(), 0.0);
      double want_loss = 0, max_grad = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        const auto t = static_cast<std::int64_t>(targets.item(r));
        if (t < 0) continue;
        const double* xr = &x[static_cast<std::size_t>(r * cols)];
        double m = xr[0], s = 0;
        for (std::int64_t i = 1; i < vocab; ++i) m = std::max(m, xr[i]);
        for (std::int64_t i = 0; i < vocab; ++i) s += std::exp(xr[i] - m);
        const double lse = m + std::log(s);
        want_loss += lse - xr[t];
        for (std::int64_t i = 0; i < vocab; ++i) {
          const double d = (std::exp(xr[i] - lse) - (i == t ? 1.0 : 0.0)) * dloss / normaliser;
          want_grad[static_cast<std::size_t>(r * cols + i)] = d;
          max_grad = std::max(max_grad, std::abs(d));
        }
      }
      want_loss /= normaliser;
      BOOST_TEST(std::abs(got.loss.item(0) - want_loss) <= loss_tol * std::abs(want_loss),
                 "loss " << got.loss.item(0) << " vs " << want_loss);
      double worst = 0;
      for (std::size_t i = 0; i < g.size(); ++i)
        worst = std::max(worst, std::abs(g[i] - want_grad[i]));
      BOOST_TEST(worst <= grad_tol * max_grad,
                 "max |gradient - reference| " << worst << " vs max " << max_grad);
    }
  }
}

// Padded columns hold large logits here: in the log-sum-exp they would
// change every loss. They are out of it (the loss is that of the first
// `vocab` columns alone, bit for bit) and their gradient is exactly 0.
BOOST_AUTO_TEST_CASE(padded_columns_take_no_part) {
  auto gen = test::fresh_generator();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const std::int64_t rows = 10, vocab = 37, cols = 128;
    BOOST_TEST_CONTEXT(dtype_name(dtype)) {
      auto [logits, targets] = random_case(rows, cols, vocab, dtype, gen);
      for (std::int64_t r = 0; r < rows; ++r)
        logits.flatten()
            .slice(r * cols + vocab, cols - vocab)
            .copy_(Tensor::full({cols - vocab}, 30.0, dtype));
      const Result padded = fused(logits, targets, vocab, 5.0, 1.0);
      const Result own = fused(first_columns(logits, vocab), targets, 0, 5.0, 1.0);
      BOOST_TEST(same_bits(padded.losses, own.losses));
      BOOST_TEST(same_bits(padded.loss, own.loss));
      BOOST_TEST(same_bits(first_columns(padded.dlogits, vocab), own.dlogits));
      const std::vector<double> g = padded.dlogits.to_doubles();
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t i = vocab; i < cols; ++i)
          BOOST_TEST(g[static_cast<std::size_t>(r * cols + i)] == 0.0);
      BOOST_TEST(std::isfinite(padded.loss.item(0)));
    }
  }
}

BOOST_AUTO_TEST_CASE(refuses_bad_input) {
  auto gen = test::fresh_generator();
  auto [logits, targets] = random_case(4, 64, 37, DType::f32, gen);
  auto message = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // A target among the padded columns is out of the vocabulary.
  Tensor bad = targets.clone();
  bad.set_item(2, 40.0);
  const std::string m = message([&] { fused(logits, bad, 37, 1.0, 1.0); });
  BOOST_TEST(m.find("40") != std::string::npos, m);
  BOOST_TEST(message([&] { fused(logits, targets, 65, 1.0, 1.0); }).find("vocabulary 65") !=
             std::string::npos);
  BOOST_TEST(message([&] { fused(logits, targets, 37, 0.0, 1.0); }).find("normaliser") !=
             std::string::npos);
  Tensor losses = Tensor::empty({4}, DType::f32), loss = Tensor::empty({1}, DType::f32);
  BOOST_TEST(message([&] {
               cross_entropy_fused(logits, targets, 37, 1.0, 1.0, losses, loss,
                                   Tensor::empty({4, 63}, DType::f32));
             }).find("must match") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
