// The process's address-space limit (RLIMIT_AS, `ulimit -v`, or RLIMIT_DATA,
// `ulimit -d`), for messages about host memory.
//
// Note [Address-space limit]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every mapping counts against the limit, not only memory in use: thread stacks (8 MiB each by default), malloc's
// per-thread arenas (64 MiB of reservation each), the libraries. A process
// under it runs out of host memory long before the machine does, and then
// "free memory" and the memory plan are the wrong advice. So an out-of-memory
// error on host memory names the limit and what is mapped of it
// (caching_allocator.cpp), zrt-train's hint says to raise it, and the
// memory zrt-train counts as available before a run is at most what the
// limit leaves (tools/train/train_setup.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace zrt {

struct AddressSpaceLimit {
  std::size_t limit = 0;  // bytes, the soft limit
  std::size_t used = 0;   // bytes it counts now (VmSize; for -d, data and stack)
  bool data = false;      // RLIMIT_DATA (ulimit -d), not RLIMIT_AS (ulimit -v)
  std::size_t left() const { return used < limit ? limit - used : 0; }
  // "the address-space limit of 293 MiB (ulimit -v), 290 MiB of it used"
  std::string describe() const;
};

// The limit that leaves the least when one is set: RLIMIT_AS, or RLIMIT_DATA,
// which since Linux 4.7 counts private anonymous mappings too (malloc's,
// OpenBLAS's buffers); nullopt when neither is set.
std::optional<AddressSpaceLimit> address_space_limit();

}  // namespace zrt
