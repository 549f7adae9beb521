// Address space without memory, for dry runs (Note [Dry runs] in
// model_zoo/trainer/memory_plan.h).
#include <atomic>
#include <cstdint>

#include "zrt/runtime/memory/raw_memory_source.h"

namespace zrt {

namespace {

// Hands out distinct, 512-byte aligned addresses from a counter and never
// maps them: a block of it is bookkeeping only, and touching one faults,
// which is how a dry run shows it issued no work on its data.
class UnbackedMemorySource final : public RawMemorySource {
 public:
  void* allocate(std::size_t nbytes) override {
    constexpr std::size_t kAlignment = 512;
    const std::size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < nbytes || rounded > kSpan - next_) return nullptr;  // past the reserved span
    const std::uintptr_t at = kBase + next_;
    next_ += rounded;  // freed segments are not reused: the counter only grows
    return reinterpret_cast<void*>(at);
  }
  void free(void*) noexcept override {}
  Device device() const override { return Device::cpu(); }
  const char* name() const override { return "unbacked address space (dry run)"; }
  void fill(void*, std::size_t, unsigned char, Stream) override {}  // nothing to poison

 private:
  // Above any heap or mapping of a 47-bit user space; 2^62 bytes of room.
  static constexpr std::uintptr_t kBase = std::uintptr_t{1} << 62;
  static constexpr std::size_t kSpan = std::size_t{1} << 62;
  std::size_t next_ = 0;  // the caching allocator serialises calls
};

}  // namespace

RawMemorySourcePtr make_unbacked_memory_source() {
  return std::make_unique<UnbackedMemorySource>();
}

}  // namespace zrt
