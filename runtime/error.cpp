#include "zrt/runtime/error.h"

#include <cstdio>

namespace zrt {

std::string Error::where() const {
  if (!file_ || !*file_) return "";
  return *expr_ ? detail::concat("check `", expr_, "` failed at ", file_, ":", line_)
                : detail::concat("at ", file_, ":", line_);
}

void report_in_destructor(const char* where, const std::exception& e) noexcept {
  std::fprintf(stderr, "zrt: error ignored in %s: %s\n", where, e.what());
}

namespace detail {

std::string location_suffix(const char* expr, const char* file, int line) {
  return " [" + Error("", file, line, expr).where() + "]";
}

}  // namespace detail
}  // namespace zrt
