#include <cstdlib>
#include <cstring>

#include "zrt/runtime/memory/raw_memory_source.h"

namespace zrt {

void RawMemorySource::fill(void* ptr, std::size_t nbytes, unsigned char byte, Stream stream) {
  if (!stream.is_cpu()) return;
  run_on_cpu_stream(stream, "poisoning memory",
                    [ptr, nbytes, byte] { std::memset(ptr, byte, nbytes); });
}

namespace {

// 512 bytes: the caching allocator's rounding granularity, so every block
// carved out of a segment keeps at least the 64-byte alignment it promises.
constexpr std::size_t kHostSegmentAlignment = 512;

class HostMemorySource final : public RawMemorySource {
 public:
  void* allocate(std::size_t nbytes) override {
    if (nbytes > SIZE_MAX - kHostSegmentAlignment) return nullptr;
    std::size_t rounded =
        (nbytes + kHostSegmentAlignment - 1) / kHostSegmentAlignment * kHostSegmentAlignment;
    return std::aligned_alloc(kHostSegmentAlignment, rounded);
  }
  void free(void* ptr) noexcept override { std::free(ptr); }
  Device device() const override { return Device::cpu(); }
  const char* name() const override { return "host memory"; }
};

}  // namespace

RawMemorySourcePtr make_host_memory_source() { return std::make_unique<HostMemorySource>(); }

}  // namespace zrt
