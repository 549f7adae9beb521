// Fused AdamW against a float64 reimplementation of torch.optim.AdamW: every
// size, gradient dtype, weight-decay ranges, grad scale and the low-precision
// copy of the param written in the same pass.
#include <boost/test/unit_test.hpp>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/ops/adamw_reference.h"
#include "zrt/kernels/ops/adamw.h"

using namespace zrt;
using namespace zrt::test;
using kernels::AdamWHyperparams;
using kernels::ElementRange;

namespace {
// f32 state through a few steps: a handful of roundings per operation.
constexpr double kRtol = 4e-6;
}  // namespace

BOOST_AUTO_TEST_SUITE(kernels_adamw)

BOOST_AUTO_TEST_CASE(matches_float64_reference) {
  auto gen = fresh_generator();
  const AdamWHyperparams hp{
      .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  int config = 0;
  for (std::int64_t n : kSizes) {
    for (DType gt : {DType::f32, DType::bf16, DType::f16}) {
      ++config;
      const std::vector<ElementRange> ranges = random_decay_ranges(n, gen);
      const double grad_scale = config % 2 ? 1.0 : 0.37;
      const DType out_t = config % 3 == 0 ? DType::f16 : DType::bf16;
      Tensor p = random_tensor(n, DType::f32, gen, -1, 1);
      Tensor m = random_tensor(n, DType::f32, gen, -0.1, 0.1);
      Tensor v = random_tensor(n, DType::f32, gen, 0, 0.01);
      Tensor out = odd_offset_view(n, out_t);
      AdamWReference ref{p.to_doubles(), m.to_doubles(), v.to_doubles()};
      for (std::int64_t step = 4; step <= 6; ++step) {
        Tensor g = random_tensor(n, gt, gen, -1, 1);
        poison(out);
        kernels::fused_adamw(p, m, v, g, step, hp, ranges,
                             {.grad_scale = grad_scale, .param_out = out, .rounding = {}});
        ref.step(g.to_doubles(), step, hp, ranges, grad_scale);
      }
      BOOST_TEST_CONTEXT("n=" << n << " grad " << dtype_name(gt)) {
        check_close(p.to_doubles(), ref.p, kRtol, "param");
        // m and v sum terms up to (1 - beta) * |g| ~ 0.1 and (1 - beta2) * g^2 ~ 0.05.
        check_close(m.to_doubles(), ref.m, kRtol, "exp_avg", 0.1);
        check_close(v.to_doubles(), ref.v, kRtol, "exp_avg_sq", 0.05);
        const std::vector<double> pf = p.to_doubles(), o = out.to_doubles();
        for (std::int64_t i = 0; i < n; ++i)
          BOOST_REQUIRE(same_value(o[i], round_to(out_t, pf[i])));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(decay_only_inside_ranges) {
  // lr*wd large and zero gradients' moments: with m = v = 0 and g = 0 the
  // update is exactly the decay, so p changes exactly inside the ranges.
  const std::int64_t n = 40;
  Tensor p = Tensor::full({n}, 1.0, DType::f32), m = Tensor::zeros({n}, DType::f32),
         v = Tensor::zeros({n}, DType::f32), g = Tensor::zeros({n}, DType::bf16);
  const std::vector<ElementRange> ranges = {{3, 7}, {7, 8}, {20, 39}};
  kernels::fused_adamw(p, m, v, g, 1, {.lr = 0.5, .weight_decay = 0.5}, ranges);
  const std::vector<double> got = p.to_doubles();
  for (std::int64_t i = 0; i < n; ++i) {
    const bool decays = (i >= 3 && i < 8) || (i >= 20 && i < 39);
    BOOST_TEST(got[i] == (decays ? 0.75 : 1.0), "element " << i);
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_throw_typed_errors) {
  auto f32 = [](std::int64_t n) { return Tensor::zeros({n}, DType::f32); };
  Tensor p = f32(8), m = f32(8), v = f32(8), g = f32(8);
  const AdamWHyperparams hp;
  const std::vector<ElementRange> none;
  const std::vector<ElementRange> overlapping = {{0, 4}, {3, 6}}, outside = {{4, 9}},
                                  reversed = {{5, 4}};
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, g, 0, hp, none), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, f32(7), 1, hp, none), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, Tensor::zeros({8}, DType::bf16), g, 1, hp, none),
                    InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, Tensor::zeros({8}, DType::f64), 1, hp, none),
                    InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, g, 1, hp, overlapping), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, g, 1, hp, outside), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, g, 1, hp, reversed), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, g, 1, {.beta1 = 1.0}, none), InvalidArgument);
  BOOST_CHECK_THROW(
      kernels::fused_adamw(p, m, v, g, 1, hp, none, {.param_out = f32(8), .rounding = {}}),
      InvalidArgument);
  BOOST_CHECK_THROW(
      kernels::fused_adamw(p, m, v, g, 1, hp, none,
                           {.param_out = Tensor::zeros({7}, DType::bf16), .rounding = {}}),
      InvalidArgument);
  free_storage(m);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, m, v, g, 1, hp, none), InvalidState);
}

BOOST_AUTO_TEST_SUITE_END()
