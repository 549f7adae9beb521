#include "zrt/runtime/memory/address_space.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

#include "zrt/runtime/error.h"

namespace zrt {

namespace {

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::string AddressSpaceLimit::describe() const {
  return detail::concat("the address-space limit of ", mib(limit), " (ulimit -v), ", mib(used),
                        " of it mapped");
}

std::optional<AddressSpaceLimit> address_space_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
  AddressSpaceLimit a;
  a.limit = static_cast<std::size_t>(r.rlim_cur);
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  if (statm >> pages) a.used = pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return a;
}

}  // namespace zrt
