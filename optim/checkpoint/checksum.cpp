#include "zrt/optim/checkpoint/checksum.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>

namespace zrt::optim {

std::uint64_t xxh64(const void* data, std::size_t bytes) { return XXH64(data, bytes, 0); }

std::string checksum_hex(std::uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

bool is_checksum_hex(std::string_view text) {
  return text.size() == 16 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

struct StreamingXxh64::State {
  XXH64_state_t* s = XXH64_createState();
  ~State() { XXH64_freeState(s); }
};

StreamingXxh64::StreamingXxh64() : state_(std::make_unique<State>()) { XXH64_reset(state_->s, 0); }
StreamingXxh64::~StreamingXxh64() = default;
void StreamingXxh64::update(const void* data, std::size_t bytes) {
  XXH64_update(state_->s, data, bytes);
}
std::uint64_t StreamingXxh64::digest() const { return XXH64_digest(state_->s); }

}  // namespace zrt::optim
