// Errors raised by the optimizer.
#pragma once

#include "zrt/runtime/error.h"

namespace zrt::optim {

// Too many optimizer steps in a row were skipped for non-finite gradients:
// training is diverging (or the loss scale cannot recover). Every rank throws
// it at the same step, since the skip decision is agreed across ranks.
class TooManySkippedSteps : public InvalidState {
 public:
  using InvalidState::InvalidState;
};

}  // namespace zrt::optim
