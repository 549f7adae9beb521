// Note [A diverged run fails]: which endings of a run are a divergence.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/support/expect_throw.h"
#include "tools/train/divergence_watch.h"
#include "zrt/optim/optim_error.h"

namespace zrt::train {
namespace {

using test::expect_throw;

// A run of `steps` steps whose steps `skipped` were skipped, ending on `loss`.
void judge(std::int64_t steps, const std::vector<std::int64_t>& skipped, double loss = 2.5) {
  DivergenceWatch watch(steps, "lower --lr");
  for (std::int64_t s = 0; s < steps; ++s) {
    model_zoo::StepStats stats;
    stats.skipped = std::find(skipped.begin(), skipped.end(), s) != skipped.end();
    stats.loss = s + 1 == steps ? loss : 3.0;
    watch.add(stats);
  }
  watch.check();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(divergence_watch)

BOOST_AUTO_TEST_CASE(the_window_is_a_fifth_of_the_steps_from_3_to_50) {
  BOOST_TEST(DivergenceWatch::window(4) == 0);
  BOOST_TEST(DivergenceWatch::window(5) == 3);
  BOOST_TEST(DivergenceWatch::window(9) == 3);
  BOOST_TEST(DivergenceWatch::window(20) == 4);
  BOOST_TEST(DivergenceWatch::window(1000) == 50);
}

BOOST_AUTO_TEST_CASE(one_or_two_skips_at_the_end_of_a_short_run_are_no_divergence) {
  // An fp16 run of 8 steps: two skips while the loss scale settles, one
  // backoff on the last step.
  judge(8, {0, 1, 7});
  judge(8, {6, 7});
  judge(5, {0, 1, 3, 4});
  judge(4, {0, 1, 2, 3});  // too short to judge by skips
}

BOOST_AUTO_TEST_CASE(a_run_ending_in_its_window_of_skips_diverged) {
  expect_throw<optim::TooManySkippedSteps>([] { judge(8, {5, 6, 7}); }, "its last 3 steps");
  expect_throw<optim::TooManySkippedSteps>(
      [] {
        judge(30, {0, 24, 25, 26, 27, 28, 29});
      },
      "its last 6 steps");
  judge(30, {25, 26, 27, 28, 29});  // 5 < 6
}

BOOST_AUTO_TEST_CASE(a_non_finite_final_loss_diverged) {
  expect_throw<optim::TooManySkippedSteps>(
      [] { judge(3, {}, std::numeric_limits<double>::quiet_NaN()); }, "the final loss is nan");
  expect_throw<optim::TooManySkippedSteps>(
      [] { judge(100, {99}, std::numeric_limits<double>::infinity()); }, "the final loss is inf");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace zrt::train
