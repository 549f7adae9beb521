#include "zrt/runtime/memory/address_space.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

#include "zrt/runtime/error.h"

namespace zrt {

namespace {

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

ProcessMemory process_memory() {
  // statm: size resident shared text lib data(+stack) dirty, in pages.
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0, resident = 0, shared = 0, text = 0, lib = 0, data = 0;
  if (!(statm >> size >> resident >> shared >> text >> lib >> data)) return {};
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return {size * page, resident * page, data * page};
}

std::string AddressSpaceLimit::describe() const {
  return detail::concat("the ", data ? "data-segment" : "address-space", " limit of ", mib(limit),
                        " (", raise_with(), "), ", mib(used), " of it used");
}

std::optional<AddressSpaceLimit> address_space_limit() {
  const ProcessMemory now = process_memory();
  std::optional<AddressSpaceLimit> tightest;
  for (const bool is_data : {false, true}) {
    rlimit r{};
    if (getrlimit(is_data ? RLIMIT_DATA : RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
      continue;
    const AddressSpaceLimit a{static_cast<std::size_t>(r.rlim_cur), is_data ? now.data : now.mapped,
                              is_data};
    if (!tightest || a.left() < tightest->left()) tightest = a;
  }
  return tightest;
}

}  // namespace zrt
