// Tensor checksums of checkpoints: xxHash64 (seed 0) of the bytes as stored,
// written as 16 lowercase hex digits (Python: xxhash.xxh64(data).hexdigest()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace zrt::optim {

std::uint64_t xxh64(const void* data, std::size_t bytes);
std::string checksum_hex(std::uint64_t value);
// Whether `text` is a checksum as checksum_hex writes it: 16 lowercase hex digits.
bool is_checksum_hex(std::string_view text);

// xxHash64 over bytes given in pieces.
class StreamingXxh64 {
 public:
  StreamingXxh64();
  ~StreamingXxh64();
  void update(const void* data, std::size_t bytes);
  std::uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace zrt::optim
