// random_fill (Note [Counter-based parameter init]): Philox4x32-10 against
// Random123's published known answers, zrt's ln and cos against libm in
// double, any slice drawn alone equal to the same elements of a whole fill,
// on every thread count, and the moments of the two distributions.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/ops/random_fill.h"

using namespace zrt;
using namespace zrt::test;
using kernels::RandomInit;

BOOST_AUTO_TEST_SUITE(kernels_random_fill)

BOOST_AUTO_TEST_CASE(philox_matches_the_known_answers) {
  struct Case {
    std::uint32_t ctr[4], key[2], want[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) {
    const kernels::PhiloxWords w =
        kernels::philox4x32_10(c.ctr[0], c.ctr[1], c.ctr[2], c.ctr[3], c.key[0], c.key[1]);
    for (int i = 0; i < 4; ++i) BOOST_CHECK_EQUAL(w.x[i], c.want[i]);
  }
}

BOOST_AUTO_TEST_CASE(log_and_cos_agree_with_libm) {
  auto gen = fresh_generator();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double worst_log = 0, worst_cos = 0;
  std::vector<double> xs = {1.0,
                            0.5,
                            0.75,
                            std::ldexp(1.0, -53),
                            1.0 - std::ldexp(1.0, -53),
                            0.7071067811865476,
                            0.7071067811865475};
  for (int i = 0; i < 100000; ++i) xs.push_back(unit(gen));
  for (int i = 0; i < 1000; ++i) xs.push_back(std::ldexp(0.5 + unit(gen) / 2, -(i % 53)));
  for (double x : xs) {
    if (x <= 0) continue;
    worst_log = std::max(worst_log, std::abs(kernels::init_log(x) - std::log(x)) /
                                        std::max(1.0, std::abs(std::log(x))));
    if (x < 1)
      worst_cos = std::max(worst_cos, std::abs(kernels::init_cos_2pi(x) - std::cos(2 * M_PI * x)));
  }
  BOOST_TEST_MESSAGE("ln: worst relative error " << worst_log << ", cos: worst " << worst_cos);
  BOOST_CHECK_LT(worst_log, 1e-15);
  BOOST_CHECK_LT(worst_cos, 1e-14);
  for (double v : {0.0, 0.25, 0.5, 0.75})  // the quadrant edges
    BOOST_CHECK_SMALL(kernels::init_cos_2pi(v) - std::cos(2 * M_PI * v), 1e-15);
}

BOOST_AUTO_TEST_CASE(any_slice_equals_the_same_elements_of_a_whole_fill) {
  auto gen = fresh_generator();
  const std::uint64_t seed = gen();
  const std::uint64_t stream = kernels::random_stream_of("h.3.mlp.c_fc.weight");
  for (const RandomInit dist : {RandomInit{RandomInit::Kind::normal, 0.0, 0.02},
                                RandomInit{RandomInit::Kind::uniform, -0.5, 0.25}}) {
    const std::int64_t n = 10007;
    Tensor whole = Tensor::empty({n}, DType::f32);
    kernels::set_cpu_threads(1);
    kernels::random_fill(whole, dist, seed, stream, 0);
    const std::vector<double> w = whole.to_doubles();
    std::int64_t compared = 0;
    for (int threads : {1, 3}) {
      kernels::set_cpu_threads(threads);
      for (int trial = 0; trial < 20; ++trial) {
        const std::int64_t begin = std::uniform_int_distribution<std::int64_t>(0, n - 1)(gen);
        const std::int64_t len = std::uniform_int_distribution<std::int64_t>(1, n - begin)(gen);
        Tensor part = odd_offset_view(len, DType::f32);
        poison(part);
        kernels::random_fill(part, dist, seed, stream, begin);
        const std::vector<double> p = part.to_doubles();
        for (std::int64_t i = 0; i < len; ++i)
          if (!same_value(p[static_cast<std::size_t>(i)], w[static_cast<std::size_t>(begin + i)]))
            BOOST_FAIL("slice [" << begin << ", " << begin + len << ") element " << i
                                 << " differs from the whole fill on " << threads << " threads");
        compared += len;
      }
    }
    BOOST_CHECK_GT(compared, 0);
  }
  kernels::set_cpu_threads(0);
}

BOOST_AUTO_TEST_CASE(streams_and_seeds_give_other_values) {
  Tensor a = Tensor::empty({64}, DType::f32), b = Tensor::empty({64}, DType::f32);
  const RandomInit normal{};
  kernels::random_fill(a, normal, 1, kernels::random_stream_of("wte.weight"), 0);
  kernels::random_fill(b, normal, 1, kernels::random_stream_of("wpe.weight"), 0);
  BOOST_CHECK(a.to_doubles() != b.to_doubles());
  kernels::random_fill(b, normal, 2, kernels::random_stream_of("wte.weight"), 0);
  BOOST_CHECK(a.to_doubles() != b.to_doubles());
  kernels::random_fill(b, normal, 1, kernels::random_stream_of("wte.weight"), 1);
  BOOST_CHECK(a.to_doubles() != b.to_doubles());
  // FNV-1a 64's published values.
  BOOST_CHECK_EQUAL(kernels::random_stream_of(""), 0xcbf29ce484222325ull);
  BOOST_CHECK_EQUAL(kernels::random_stream_of("a"), 0xaf63dc4c8601ec8cull);
}

BOOST_AUTO_TEST_CASE(moments_of_the_distributions) {
  auto gen = fresh_generator();
  const std::int64_t n = 1 << 20;
  Tensor t = Tensor::empty({n}, DType::f32);
  kernels::random_fill(t, {RandomInit::Kind::normal, 1.5, 2.0}, gen(), gen(), 0);
  double sum = 0, sum2 = 0, sum4 = 0;
  std::int64_t beyond3 = 0;
  for (double v : t.to_doubles()) {
    const double z = (v - 1.5) / 2.0;
    sum += z, sum2 += z * z, sum4 += z * z * z * z;
    beyond3 += std::abs(z) > 3;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean, kurt = sum4 / n;
  BOOST_TEST_MESSAGE("normal: mean " << mean << " var " << var << " E[z^4] " << kurt
                                     << " beyond 3 sigma " << beyond3);
  // About 5 standard errors: 1/sqrt(n) ~ 1e-3 for the mean, sqrt(2/n) for the variance.
  BOOST_CHECK_SMALL(mean, 5e-3);
  BOOST_CHECK_SMALL(var - 1.0, 7e-3);
  BOOST_CHECK_SMALL(kurt - 3.0, 0.05);
  BOOST_CHECK_CLOSE(static_cast<double>(beyond3) / n, 0.0026998, 10.0);  // percent
  kernels::random_fill(t, {RandomInit::Kind::uniform, -0.25, 0.75}, gen(), gen(), 0);
  double lo = 1, hi = -1, usum = 0;
  for (double v : t.to_doubles()) lo = std::min(lo, v), hi = std::max(hi, v), usum += v;
  BOOST_CHECK_GE(lo, -0.25);
  BOOST_CHECK_LE(hi, 0.75);
  BOOST_CHECK_SMALL(usum / n - 0.25, 2e-3);
}

BOOST_AUTO_TEST_SUITE_END()
