// Learning-rate schedules against values worked out by hand.
#include <boost/test/unit_test.hpp>

#include "zrt/optim/lr_schedule.h"
#include "zrt/runtime/error.h"

using namespace zrt;
using namespace zrt::optim;

BOOST_AUTO_TEST_SUITE(lr_schedule)

BOOST_AUTO_TEST_CASE(constant) {
  const ConstantLr c(3e-4);
  BOOST_TEST(c.lr(0) == 3e-4);
  BOOST_TEST(c.lr(123456789) == 3e-4);
  BOOST_CHECK_THROW(c.lr(-1), InvalidArgument);
  BOOST_CHECK_THROW(ConstantLr(-1e-3), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(warmup_then_cosine_by_hand) {
  // max 6e-4, min 6e-5, W = 10, T = 110: the cosine spans 100 steps.
  const WarmupCosineLr s({.max_lr = 6e-4, .min_lr = 6e-5, .warmup_steps = 10, .total_steps = 110});
  const double tol = 1e-12;
  BOOST_TEST(s.lr(0) == 6e-5, boost::test_tools::tolerance(tol));   // 6e-4 * 1/10
  BOOST_TEST(s.lr(4) == 3e-4, boost::test_tools::tolerance(tol));   // 6e-4 * 5/10
  BOOST_TEST(s.lr(9) == 6e-4, boost::test_tools::tolerance(tol));   // end of warm-up
  BOOST_TEST(s.lr(10) == 6e-4, boost::test_tools::tolerance(tol));  // cos(0) = 1
  // progress 1/4: 6e-5 + 0.5 * (1 + 0.70710678118654752) * 5.4e-4
  BOOST_TEST(s.lr(35) == 5.2091883092036783e-4, boost::test_tools::tolerance(tol));
  BOOST_TEST(s.lr(60) == 3.3e-4, boost::test_tools::tolerance(tol));  // progress 1/2: midpoint
  // progress 3/4: 6e-5 + 0.5 * (1 - 0.70710678118654752) * 5.4e-4
  BOOST_TEST(s.lr(85) == 1.3908116907963217e-4, boost::test_tools::tolerance(tol));
  BOOST_TEST(s.lr(109) > 6e-5);
  BOOST_TEST(s.lr(110) == 6e-5);
  BOOST_TEST(s.lr(1000000) == 6e-5);
  // Monotone: up through warm-up, then down.
  for (std::int64_t k = 1; k < 10; ++k) BOOST_TEST(s.lr(k) > s.lr(k - 1));
  for (std::int64_t k = 11; k <= 110; ++k) BOOST_TEST(s.lr(k) < s.lr(k - 1));
}

BOOST_AUTO_TEST_CASE(degenerate_spans) {
  const WarmupCosineLr no_warmup(
      {.max_lr = 1.0, .min_lr = 0.0, .warmup_steps = 0, .total_steps = 4});
  BOOST_TEST(no_warmup.lr(0) == 1.0);
  BOOST_TEST(no_warmup.lr(2) == 0.5, boost::test_tools::tolerance(1e-15));
  const WarmupCosineLr warmup_only(
      {.max_lr = 1.0, .min_lr = 0.25, .warmup_steps = 4, .total_steps = 4});
  BOOST_TEST(warmup_only.lr(1) == 0.5);
  BOOST_TEST(warmup_only.lr(3) == 1.0);
  BOOST_TEST(warmup_only.lr(4) == 0.25);
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  BOOST_CHECK_THROW(
      WarmupCosineLr({.max_lr = 1e-4, .min_lr = 1e-3, .warmup_steps = 0, .total_steps = 5}),
      InvalidArgument);
  BOOST_CHECK_THROW(
      WarmupCosineLr({.max_lr = 1e-3, .min_lr = 0, .warmup_steps = 6, .total_steps = 5}),
      InvalidArgument);
  BOOST_CHECK_THROW(
      WarmupCosineLr({.max_lr = 1e-3, .min_lr = 0, .warmup_steps = -1, .total_steps = 5}),
      InvalidArgument);
  const WarmupCosineLr s({.max_lr = 1e-3, .min_lr = 0, .warmup_steps = 1, .total_steps = 5});
  BOOST_CHECK_THROW(s.lr(-1), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
