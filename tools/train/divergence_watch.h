// Whether a run that completed its steps ended diverged (Note [A diverged
// run fails]).
#pragma once

#include <cstdint>
#include <string>

#include "zrt/model_zoo/engine/training_engine.h"

namespace zrt::train {

// Note [A diverged run fails]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// --max-skipped-steps stops a run whose gradients stay non-finite, but only
// after that many skips in a row: a short fp16 run at a wild --lr can skip
// most of its steps, end on NaN losses and look like a success. So a run
// that completes is also judged by how it ended: a non-finite final loss,
// or its last K steps all skipped, ends it with an error and exit status 1
// before the final save (the periodic checkpoints before it stay).
// K = a fifth of --steps, at least 3 and at most 50; none for a run under 5
// steps, whose first fp16 steps may skip while the loss scale settles. One
// or two skips at the end are the loss scale backing off from a single
// overflow, as any fp16 run does now and then: not a divergence.
class DivergenceWatch {
 public:
  // `advice`: what the error advises, after the finding.
  DivergenceWatch(std::int64_t steps, std::string advice);
  void add(const model_zoo::StepStats& s);
  // Throws optim::TooManySkippedSteps where the steps added ended diverged.
  void check() const;
  // The trailing skips that make a run of `steps` diverged (0: none do).
  static std::int64_t window(std::int64_t steps);

 private:
  std::int64_t window_;
  std::string advice_;
  std::int64_t trailing_skips_ = 0;
  std::int64_t seen_ = 0;
  double last_loss_ = 0;
};

}  // namespace zrt::train
