// Errors raised by the optimizer.
#pragma once

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

}  // namespace zrt::optim
