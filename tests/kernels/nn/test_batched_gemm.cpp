// batched_gemm's CPU twin (the arguments cuBLAS's launcher takes too)
// against a float64 loop over the batch: every transpose pair, two levels of
// stride with heads interleaved inside rows (attention's layouts), odd sizes,
// beta 0 over a poisoned c and beta 1 accumulating; f64 within 1e-12, f32
// within 1e-5, bf16 operands (rounded inputs in the reference) within 1e-5
// into an f32 c and within bf16's rounding (4e-3) into a bf16 c, all relative
// to 1 + Σ|a·b|. And the refusals: a matrix past its tensor, overlapping
// outputs, an output over an operand, a c dtype that is neither.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/nn/batched_gemm.h"
#include "zrt/runtime/error.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

struct Layout {
  BatchedGemm g;
  std::int64_t a_numel, b_numel, c_numel;
};

// Matrices of every operand side by side in rows of `inner` heads (like the
// heads of [B, T, C]), one such block per outer index, plus `pad` elements.
Layout interleaved(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                   std::int64_t outer, std::int64_t inner, std::int64_t pad) {
  Layout l;
  BatchedGemm& g = l.g;
  g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.outer = outer, g.inner = inner;
  auto place = [&](std::int64_t rows, std::int64_t cols, BatchedOperand& o) {
    o.inner = cols;
    o.ld = inner * cols + pad;
    o.outer = rows * o.ld + pad;
    return outer * o.outer + pad;
  };
  l.a_numel = place(ta ? k : m, ta ? m : k, g.a);
  l.b_numel = place(tb ? n : k, tb ? k : n, g.b);
  l.c_numel = place(m, n, g.c);
  return l;
}

// c's float64 reference from the operands' stored values; also Σ|a·b| per
// element for the tolerance.
void reference(const BatchedGemm& g, const std::vector<double>& a, const std::vector<double>& b,
               std::vector<double>& c, std::vector<double>& mag) {
  for (std::int64_t i = 0; i < g.outer; ++i)
    for (std::int64_t j = 0; j < g.inner; ++j)
      for (std::int64_t r = 0; r < g.m; ++r)
        for (std::int64_t x = 0; x < g.n; ++x) {
          double s = 0, s_abs = 0;
          for (std::int64_t p = 0; p < g.k; ++p) {
            const std::int64_t ia =
                i * g.a.outer + j * g.a.inner + (g.trans_a ? p * g.a.ld + r : r * g.a.ld + p);
            const std::int64_t ib =
                i * g.b.outer + j * g.b.inner + (g.trans_b ? x * g.b.ld + p : p * g.b.ld + x);
            s += a[std::size_t(ia)] * b[std::size_t(ib)];
            s_abs += std::abs(a[std::size_t(ia)] * b[std::size_t(ib)]);
          }
          const auto ic = std::size_t(i * g.c.outer + j * g.c.inner + r * g.c.ld + x);
          const double old = g.beta == 0 ? 0.0 : c[ic];
          c[ic] = g.alpha * s + g.beta * old;
          mag[ic] = std::abs(g.alpha) * s_abs + std::abs(g.beta * old);
        }
}

Tensor random_values(std::int64_t n, DType t, std::mt19937_64& gen) {
  std::uniform_real_distribution<double> dist(-1.5, 1.5);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, t);
}

// 1 at every element of c's matrices, 0 elsewhere.
std::vector<char> inside_c(const BatchedGemm& g, std::int64_t c_numel) {
  std::vector<char> in(static_cast<std::size_t>(c_numel), 0);
  for (std::int64_t i = 0; i < g.outer; ++i)
    for (std::int64_t j = 0; j < g.inner; ++j)
      for (std::int64_t r = 0; r < g.m; ++r)
        for (std::int64_t x = 0; x < g.n; ++x)
          in[std::size_t(i * g.c.outer + j * g.c.inner + r * g.c.ld + x)] = 1;
  return in;
}

void check_one(DType ab, DType c_dtype, const Layout& l, double beta, std::mt19937_64& gen) {
  BatchedGemm g = l.g;
  g.alpha = 0.75;
  g.beta = beta;
  Tensor a = random_values(l.a_numel, ab, gen), b = random_values(l.b_numel, ab, gen);
  Tensor c = random_values(l.c_numel, c_dtype, gen);
  if (beta == 0) zrt::test::poison(c);  // beta 0 must not read c
  const std::vector<double> before = c.to_doubles();
  std::vector<double> ref = before, mag(before.size(), 0.0);
  reference(g, a.to_doubles(), b.to_doubles(), ref, mag);
  batched_gemm(a, b, c, g);
  const std::vector<double> got = c.to_doubles();
  const std::vector<char> in = inside_c(g, l.c_numel);
  const double tol = ab == DType::f64 ? 1e-12 : c_dtype == DType::bf16 ? 4e-3 : 1e-5;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!in[i]) {
      BOOST_TEST(zrt::test::same_value(got[i], before[i]),
                 "element " << i << " outside c's matrices changed");
      continue;
    }
    const double err = std::abs(got[i] - ref[i]) / (1 + mag[i]);
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  BOOST_TEST(worst <= tol, dtype_name(ab) << " -> " << dtype_name(c_dtype) << " beta " << beta
                                          << ": worst relative error " << worst);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(batched_gemm_twin)

BOOST_AUTO_TEST_CASE(matches_a_float64_loop) {
  auto gen = zrt::test::fresh_generator();
  struct Dims {
    std::int64_t m, n, k, outer, inner, pad;
  };
  for (const Dims& s : {Dims{1, 1, 1, 1, 1, 0}, Dims{5, 3, 7, 2, 3, 1}, Dims{13, 9, 4, 3, 2, 0},
                        Dims{17, 17, 11, 1, 4, 3}, Dims{4, 6, 0, 2, 2, 1}}) {
    for (int t = 0; t < 4; ++t) {
      const Layout l = interleaved(t & 1, t & 2, s.m, s.n, s.k, s.outer, s.inner, s.pad);
      BOOST_TEST_CONTEXT("m " << s.m << " n " << s.n << " k " << s.k << " batch " << s.outer << "x"
                              << s.inner << " trans " << (t & 1) << (t >> 1)) {
        for (double beta : {0.0, 1.0}) {
          check_one(DType::f64, DType::f64, l, beta, gen);
          check_one(DType::f32, DType::f32, l, beta, gen);
          check_one(DType::bf16, DType::f32, l, beta, gen);
          check_one(DType::bf16, DType::bf16, l, beta, gen);
          check_one(DType::f16, DType::f32, l, beta, gen);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(refuses_bad_operands_by_name) {
  const Layout l = interleaved(false, true, 4, 5, 3, 2, 2, 0);
  Tensor a = Tensor::zeros({l.a_numel}, DType::f32), b = Tensor::zeros({l.b_numel}, DType::f32);
  Tensor c = Tensor::zeros({l.c_numel}, DType::f32);
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  batched_gemm(a, b, c, l.g);  // the layout itself is fine
  const std::string past = message([&] { batched_gemm(a.slice(0, l.a_numel - 1), b, c, l.g); });
  BOOST_TEST(past.find("operand a") != std::string::npos, past);
  BatchedGemm overlap = l.g;
  overlap.c.inner = 1;
  const std::string ov = message([&] { batched_gemm(a, b, c, overlap); });
  BOOST_TEST(ov.find("overlap") != std::string::npos, ov);
  BatchedGemm short_ld = l.g;
  short_ld.b.ld = 2;
  const std::string ld = message([&] { batched_gemm(a, b, c, short_ld); });
  BOOST_TEST(ld.find("operand b") != std::string::npos, ld);
  Tensor both = Tensor::zeros({l.a_numel + l.c_numel}, DType::f32);
  const std::string alias =
      message([&] { batched_gemm(both.slice(0, l.a_numel), b, both.slice(1, l.c_numel), l.g); });
  BOOST_TEST(alias.find("overlaps operand a") != std::string::npos, alias);
  Tensor a16 = Tensor::zeros({l.a_numel}, DType::bf16),
         b16 = Tensor::zeros({l.b_numel}, DType::bf16);
  const std::string dtype =
      message([&] { batched_gemm(a16, b16, Tensor::zeros({l.c_numel}, DType::f16), l.g); });
  BOOST_TEST(dtype.find("must be bf16 or f32") != std::string::npos, dtype);
}

BOOST_AUTO_TEST_SUITE_END()
