#include "tools/train/divergence_watch.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "zrt/optim/optim_error.h"

namespace zrt::train {

std::int64_t DivergenceWatch::window(std::int64_t steps) {
  return steps < 5 ? 0 : std::clamp<std::int64_t>(steps / 5, 3, 50);
}

DivergenceWatch::DivergenceWatch(std::int64_t steps, std::string advice)
    : window_(window(steps)), advice_(std::move(advice)) {}

void DivergenceWatch::add(const model_zoo::StepStats& s) {
  trailing_skips_ = s.skipped ? trailing_skips_ + 1 : 0;
  last_loss_ = s.loss;
  ++seen_;
}

void DivergenceWatch::check() const {
  if (seen_ == 0) return;
  ZRT_CHECK_AS(optim::TooManySkippedSteps, std::isfinite(last_loss_),
               "the run diverged: the final loss is ", last_loss_, " (", trailing_skips_,
               " steps in a row skipped for non-finite gradients at the end); ", advice_);
  ZRT_CHECK_AS(optim::TooManySkippedSteps, window_ == 0 || trailing_skips_ < window_,
               "the run diverged: its last ", trailing_skips_,
               " steps were all skipped for non-finite gradients (final loss ", last_loss_, "); ",
               advice_);
}

}  // namespace zrt::train
