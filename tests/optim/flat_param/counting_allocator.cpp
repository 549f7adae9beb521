#include "tests/optim/flat_param/counting_allocator.h"

#include <algorithm>

namespace zrt::testing {

void* CountingAllocator::allocate(std::size_t nbytes, Stream stream) {
  void* p = host_->allocate(nbytes, stream);
  std::lock_guard lock(mu_);
  live_.emplace_back(p, nbytes);
  stats_.allocated += nbytes;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  ++stats_.num_allocs;
  return p;
}

void CountingAllocator::deallocate(void* p) noexcept {
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(live_.begin(), live_.end(), [&](const auto& e) { return e.first == p; });
    if (it != live_.end()) {
      stats_.allocated -= it->second;
      live_.erase(it);
    }
    ++stats_.num_frees;
  }
  host_->deallocate(p);
}

MemoryStats CountingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace zrt::testing
