// Where AdamW's state lives: with the parameters (none), in host memory
// (host), or in files under a directory (disk:DIR), Note [Optimizer state on disk].
#pragma once

#include <cstdint>
#include <string>

namespace zrt::optim {

struct OptimizerOffload {
  enum class Kind { none, host, disk };
  Kind kind = Kind::none;
  std::string dir{};  // disk: where each rank's scratch file goes
  std::int64_t chunk_elements =
      1 << 23;  // disk: elements of each moment per streamed chunk (32 MiB)

  // "none", "host" or "disk:DIR".
  std::string str() const;
};

// InvalidArgument, naming the setting, for an offload a module cannot run:
// a kind no enumerator has, a dir beside a kind that reads none, a disk
// chunk of no elements, and (unless `dry_run`: nothing is written) a dir
// that is not a writable directory.
void check_optimizer_offload(const OptimizerOffload& offload, bool dry_run);

// Parses "none", "host" or "disk:DIR" (DIR not empty); InvalidArgument names a bad value.
OptimizerOffload parse_optimizer_offload(const std::string& text);

}  // namespace zrt::optim
