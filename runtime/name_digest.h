// A 64-bit digest of a name (FNV-1a), the same in every process and build:
// the flight recorder's subject ids, the temporary names of long outputs.
#pragma once

#include <cstdint>
#include <string_view>

namespace zrt {

inline std::uint64_t name_digest(std::string_view name) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace zrt
