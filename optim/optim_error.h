// Errors raised by the optimizer.
#pragma once

#include <utility>

#include "zrt/runtime/error.h"

namespace zrt::optim {

// Too many optimizer steps in a row were skipped for non-finite gradients:
// training is diverging (or the loss scale cannot recover). Every rank throws
// it at the same step, since the skip decision is agreed across ranks. A
// user error: the run's settings (learning rate, loss scale) are the cause,
// not a bug (Note [User errors and internal errors]).
class TooManySkippedSteps : public UserError {
 public:
  using UserError::UserError;
};

// The same error, with what a layer above the optimizer found of the
// skipped step that reached the limit (the engine's statistics, the
// trainer's report), so that the step is reported like any other.
template <class Found>
class TooManySkippedStepsWith : public TooManySkippedSteps {
 public:
  TooManySkippedStepsWith(const TooManySkippedSteps& e, Found found)
      : TooManySkippedSteps(e), found(std::move(found)) {}
  Found found;
};

}  // namespace zrt::optim
