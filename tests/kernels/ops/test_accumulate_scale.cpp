// grad accumulate (f32 += scale * f32|bf16|f16) and scale in place, against
// float64 with a bound of one rounding per f32 operation.
#include <boost/test/unit_test.hpp>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/ops/grad_accumulate.h"
#include "zrt/kernels/ops/scale.h"

using namespace zrt;
using namespace zrt::test;

namespace {
constexpr double kUnitRoundoff = 0x1p-24;  // f32
}

BOOST_AUTO_TEST_SUITE(kernels_accumulate_scale)

BOOST_AUTO_TEST_CASE(accumulate_matches_float64) {
  auto gen = fresh_generator();
  std::uniform_real_distribution<float> scale_dist(-3.0f, 3.0f);
  for (std::int64_t n : kSizes) {
    for (DType gt : {DType::f32, DType::bf16, DType::f16}) {
      Tensor acc = random_tensor(n, DType::f32, gen, -10, 10);
      Tensor grad = random_tensor(n, gt, gen, -10, 10);
      const float scale = scale_dist(gen);
      const std::vector<double> a0 = acc.to_doubles(), g = grad.to_doubles();
      kernels::accumulate_grad(acc, grad, scale);
      const std::vector<double> a1 = acc.to_doubles();
      for (std::int64_t i = 0; i < n; ++i) {
        const double want = a0[i] + double(scale) * g[i];
        // Two roundings: scale * g, then the sum.
        const double tol = 2 * kUnitRoundoff * (std::fabs(a0[i]) + std::fabs(double(scale) * g[i]));
        if (!(std::fabs(a1[i] - want) <= tol))
          BOOST_FAIL(dtype_name(gt) << " n=" << n << " i=" << i << ": " << a1[i] << " vs " << want);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(accumulate_rejects_bad_operands) {
  BOOST_CHECK_THROW(
      kernels::accumulate_grad(Tensor::empty({4}, DType::bf16), Tensor::empty({4}, DType::f32)),
      InvalidArgument);
  BOOST_CHECK_THROW(
      kernels::accumulate_grad(Tensor::empty({4}, DType::f32), Tensor::empty({5}, DType::f32)),
      InvalidArgument);
  BOOST_CHECK_THROW(
      kernels::accumulate_grad(Tensor::empty({4}, DType::f32), Tensor::empty({4}, DType::f64)),
      InvalidArgument);
}

BOOST_AUTO_TEST_CASE(scale_matches_float64) {
  auto gen = fresh_generator();
  for (std::int64_t n : kSizes) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      Tensor x = random_tensor(n, t, gen, -100, 100);
      const double factor = 0.37;
      const std::vector<double> x0 = x.to_doubles();
      kernels::scale_(x, factor);
      const std::vector<double> x1 = x.to_doubles();
      const double f = static_cast<float>(factor);
      for (std::int64_t i = 0; i < n; ++i) {
        // The product of two f32 values is exact in f64, so this is exactly
        // one f32 rounding of the product, then the rounding to t.
        const double want = round_to(t, static_cast<float>(x0[i] * f));
        if (!same_value(x1[i], want))
          BOOST_FAIL(dtype_name(t) << " n=" << n << " i=" << i << ": " << x1[i] << " vs " << want);
      }
    }
  }
  BOOST_CHECK_THROW(kernels::scale_(Tensor::empty({3}, DType::i32), 2.0), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
