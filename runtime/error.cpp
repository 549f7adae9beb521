#include "zrt/runtime/error.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

namespace zrt {

std::string Error::where() const {
  if (!file_ || !*file_) return "";
  return *expr_ ? detail::concat("check `", expr_, "` failed at ", file_, ":", line_)
                : detail::concat("at ", file_, ":", line_);
}

void report_in_destructor(const char* where, const std::exception& e) noexcept {
  // While an exception unwinds the stack, an error met here is almost
  // always that failure seen again (an event of the failed stream, a
  // collective of the broken group): the one propagating is reported, and
  // this one only under ZRT_DEBUG=1.
  const char* debug = std::getenv("ZRT_DEBUG");
  if (std::uncaught_exceptions() > 0 && !(debug && std::strcmp(debug, "1") == 0)) return;
  std::fprintf(stderr, "zrt: error ignored in %s: %s\n", where, e.what());
}

namespace detail {

std::string location_suffix(const char* expr, const char* file, int line) {
  return " [" + Error("", file, line, expr).where() + "]";
}

}  // namespace detail
}  // namespace zrt
