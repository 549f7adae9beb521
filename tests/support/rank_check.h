// Checks for code that runs on rank threads or in MPI ranks: Boost.Test's
// assertions are not thread-safe, so a failed check throws instead, and the
// main thread (run_local_ranks rethrows) or the MPI main reports it.
#pragma once

#include "zrt/runtime/error.h"

namespace zrt::testing {

class CheckFailed : public Error {
 public:
  using Error::Error;
};

}  // namespace zrt::testing

#define ZRT_EXPECT(cond, ...) \
  ZRT_CHECK_SAID(::zrt::testing::CheckFailed, by_kind, cond, #cond, __VA_ARGS__)
