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

// What /proc/self/statm says of this process, in bytes (0 where unknown).
struct ProcessMemory {
  std::size_t mapped = 0;    // VmSize: every mapping, what RLIMIT_AS counts
  std::size_t resident = 0;  // VmRSS
  std::size_t data = 0;      // data and stack: what RLIMIT_DATA counts
};
ProcessMemory process_memory();

struct AddressSpaceLimit {
  std::size_t limit = 0;  // bytes, the soft limit
  std::size_t used = 0;   // bytes it counts now (ProcessMemory::mapped; for -d, ::data)
  bool data = false;      // RLIMIT_DATA (ulimit -d), not RLIMIT_AS (ulimit -v)
  std::size_t left() const { return used < limit ? limit - used : 0; }
  // The shell command that raises it: "ulimit -v" or "ulimit -d".
  const char* raise_with() const { return data ? "ulimit -d" : "ulimit -v"; }
  // "the address-space limit of 293 MiB (ulimit -v), 290 MiB of it used"
  std::string describe() const;
};

// The limit that leaves the least when one is set: RLIMIT_AS, or RLIMIT_DATA,
// which since Linux 4.7 counts private anonymous mappings too (malloc's,
// OpenBLAS's buffers); nullopt when neither is set.
std::optional<AddressSpaceLimit> address_space_limit();

}  // namespace zrt
