// A host allocator that keeps exact live-byte counts, for leak checks.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "zrt/runtime/allocator.h"

namespace zrt::testing {

class CountingAllocator final : public Allocator {
 public:
  void* allocate(std::size_t nbytes, Stream stream) override;
  void deallocate(void* p) noexcept override;
  Device device() const override { return Device::cpu(); }
  MemoryStats stats() const override;

 private:
  AllocatorPtr host_ = default_allocator(Device::cpu());
  mutable std::mutex mu_;
  std::vector<std::pair<void*, std::size_t>> live_;
  MemoryStats stats_;
};

}  // namespace zrt::testing
