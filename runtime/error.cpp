#include "zrt/runtime/error.h"

#include <cstdio>

namespace zrt {

void report_in_destructor(const char* where, const std::exception& e) noexcept {
  std::fprintf(stderr, "zrt: error ignored in %s: %s\n", where, e.what());
}

}  // namespace zrt
