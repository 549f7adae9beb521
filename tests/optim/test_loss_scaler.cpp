// DynamicLossScaler: GradScaler's backoff and growth, hysteresis, the
// disabled scaler of bf16/f32, checkpoint state and bad options.
#include <boost/test/unit_test.hpp>

#include "zrt/optim/loss_scaler.h"
#include "zrt/runtime/error.h"

using namespace zrt;
using namespace zrt::optim;

namespace {

void clean_steps(DynamicLossScaler& s, int n) {
  for (int i = 0; i < n; ++i) s.update(false);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loss_scaler)

BOOST_AUTO_TEST_CASE(grad_scaler_defaults) {
  DynamicLossScaler s;
  BOOST_TEST(s.scale() == 65536.0);
  BOOST_TEST(s.inv_scale() == 1.0 / 65536);
  s.update(true);
  BOOST_TEST(s.scale() == 32768.0);  // hysteresis 1: every overflow backs off
  s.update(true);
  BOOST_TEST(s.scale() == 16384.0);
  clean_steps(s, 1999);
  BOOST_TEST(s.scale() == 16384.0);
  s.update(false);  // the 2000th clean step in a row
  BOOST_TEST(s.scale() == 32768.0);
  BOOST_TEST(s.state().growth_tracker == 0);
  // An overflow restarts the growth count.
  clean_steps(s, 1500);
  s.update(true);
  clean_steps(s, 1999);
  BOOST_TEST(s.scale() == 16384.0);
  s.update(false);
  BOOST_TEST(s.scale() == 32768.0);
}

BOOST_AUTO_TEST_CASE(hysteresis_tolerates_overflows_in_a_row) {
  DynamicLossScaler s({.init_scale = 1024, .growth_interval = 4, .hysteresis = 3});
  s.update(true);
  s.update(true);
  BOOST_TEST(s.scale() == 1024.0);  // two tolerated
  s.update(true);
  BOOST_TEST(s.scale() == 512.0);  // the third backs off
  s.update(true);
  BOOST_TEST(s.scale() == 256.0);  // and so does each further one in a row
  s.update(false);                 // a clean step restores the hysteresis
  s.update(true);
  s.update(true);
  BOOST_TEST(s.scale() == 256.0);
  clean_steps(s, 3);
  BOOST_TEST(s.scale() == 256.0);
  s.update(false);  // 4 clean in a row
  BOOST_TEST(s.scale() == 512.0);
}

BOOST_AUTO_TEST_CASE(backs_off_to_min_scale_and_no_further) {
  // Without the floor, 200 overflows in a row take 65536 to 0 in f32: no
  // later step (or resume of its checkpoint) has a loss scale to train with.
  DynamicLossScaler s;
  for (int i = 0; i < 200; ++i) s.update(true);
  BOOST_TEST(s.scale() == 1.0);
  DynamicLossScaler t({.init_scale = 8, .min_scale = 0.25});
  for (int i = 0; i < 10; ++i) t.update(true);
  BOOST_TEST(t.scale() == 0.25);
  // A checkpoint saved by a scaler without the floor resumes at it.
  s.load_state({.scale = 7.006492321624085e-46, .growth_tracker = 0, .hysteresis_left = 1});
  BOOST_TEST(s.scale() == 1.0);
  BOOST_CHECK_THROW(DynamicLossScaler({.init_scale = 4, .min_scale = 8}), InvalidArgument);
  BOOST_CHECK_THROW(DynamicLossScaler({.min_scale = 0}), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(never_grows_into_infinity) {
  // ... in fp32, where the loss is scaled (and a checkpoint's scale checked):
  // 2^127 grows no further, 2^128 would be inf there, and starts no higher.
  BOOST_CHECK_THROW(DynamicLossScaler({.init_scale = 1e308}), InvalidArgument);
  DynamicLossScaler f({.init_scale = 0x1p126, .growth_interval = 1});
  f.update(false);
  BOOST_TEST(f.scale() == 0x1p127);
  f.update(false);
  BOOST_TEST(f.scale() == 0x1p127);
}

BOOST_AUTO_TEST_CASE(disabled_for_bf16_and_f32) {
  BOOST_TEST(loss_scaler_options_for(DType::f16).enabled);
  BOOST_TEST(!loss_scaler_options_for(DType::bf16).enabled);
  BOOST_TEST(!loss_scaler_options_for(DType::f32).enabled);
  DynamicLossScaler s(loss_scaler_options_for(DType::bf16));
  BOOST_TEST(s.scale() == 1.0);
  s.update(true);
  clean_steps(s, 5000);
  BOOST_TEST(s.scale() == 1.0);
  // An f16 run's state loaded into a disabled scaler keeps the scale at 1.
  s.load_state({.scale = 1024, .growth_tracker = 0, .hysteresis_left = 1});
  BOOST_TEST(s.scale() == 1.0);
  BOOST_TEST(s.inv_scale() == 1.0);
}

BOOST_AUTO_TEST_CASE(state_round_trip_and_bad_options) {
  DynamicLossScaler a({.init_scale = 256, .growth_interval = 10, .hysteresis = 2});
  a.update(true);
  clean_steps(a, 3);
  a.update(true);
  DynamicLossScaler b({.init_scale = 256, .growth_interval = 10, .hysteresis = 2});
  b.load_state(a.state());
  for (bool overflow : {false, true, true, false, false}) {
    a.update(overflow);
    b.update(overflow);
    BOOST_TEST(a.scale() == b.scale());
  }
  BOOST_CHECK_THROW(b.load_state({.scale = 0, .growth_tracker = 0, .hysteresis_left = 1}),
                    InvalidArgument);
  BOOST_CHECK_THROW(b.load_state({.scale = 8, .growth_tracker = -1, .hysteresis_left = 1}),
                    InvalidArgument);
  // Saved under other settings (a larger growth interval and hysteresis):
  // the counters are capped, so the next clean step grows the scale and
  // the next overflow backs it off.
  b.load_state({.scale = 8, .growth_tracker = 25, .hysteresis_left = 5});
  BOOST_TEST(b.state().growth_tracker == 9);
  BOOST_TEST(b.state().hysteresis_left == 2);
  b.update(false);
  BOOST_TEST(b.scale() == 16);
  b.update(true);
  b.update(true);
  BOOST_TEST(b.scale() == 8);
  BOOST_CHECK_THROW(DynamicLossScaler({.init_scale = -1}), InvalidArgument);
  BOOST_CHECK_THROW(DynamicLossScaler({.growth_factor = 1.0}), InvalidArgument);
  BOOST_CHECK_THROW(DynamicLossScaler({.backoff_factor = 1.0}), InvalidArgument);
  BOOST_CHECK_THROW(DynamicLossScaler({.growth_interval = 0}), InvalidArgument);
  BOOST_CHECK_THROW(DynamicLossScaler({.hysteresis = 0}), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
