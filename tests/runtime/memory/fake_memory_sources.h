// Controllable raw memory and stream events for CPU tests of the caching
// policy: a host source with a fixed capacity that can be told to fail, and
// events that complete only when the test says so. Each fake shares its state
// with the test through a shared_ptr, since the allocator owns the fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/memory/raw_memory_source.h"
#include "zrt/runtime/memory/stream_events.h"

namespace zrt::test {

// A distinct stream handle for per-stream tests. Never handed to CUDA: the
// fake event source is the only thing that looks at it.
inline Stream fake_stream(std::uintptr_t id) {
  return Stream::cuda(0, reinterpret_cast<void*>(id));
}

struct FakeSourceState {
  Device device = Device::cpu();    // what the source claims its memory is
  std::size_t capacity = SIZE_MAX;  // bytes the source can hand out in all
  int fail_next = 0;                // this many allocate() calls return nullptr
  std::size_t in_use = 0;
  std::vector<std::size_t> allocation_sizes;  // every successful allocate()
  std::unordered_map<void*, std::size_t> live;
};

class FakeMemorySource final : public RawMemorySource {
 public:
  explicit FakeMemorySource(std::shared_ptr<FakeSourceState> state)
      : state_(std::move(state)), host_(make_host_memory_source()) {}
  ~FakeMemorySource() override {
    for (auto& [ptr, size] : state_->live) host_->free(ptr);
  }
  void* allocate(std::size_t nbytes) override {
    if (state_->fail_next > 0) {
      --state_->fail_next;
      return nullptr;
    }
    if (nbytes > state_->capacity - state_->in_use) return nullptr;
    void* ptr = host_->allocate(nbytes);
    if (!ptr) return nullptr;
    state_->in_use += nbytes;
    state_->allocation_sizes.push_back(nbytes);
    state_->live.emplace(ptr, nbytes);
    return ptr;
  }
  void free(void* ptr) noexcept override {
    auto it = state_->live.find(ptr);
    if (it == state_->live.end()) std::abort();  // a policy bug: freeing what it never got
    state_->in_use -= it->second;
    state_->live.erase(it);
    host_->free(ptr);
  }
  Device device() const override { return state_->device; }
  std::optional<std::size_t> free_bytes() const override {
    if (state_->capacity == SIZE_MAX) return std::nullopt;
    return state_->capacity - state_->in_use;
  }
  const char* name() const override { return "fake host memory"; }

 private:
  std::shared_ptr<FakeSourceState> state_;
  RawMemorySourcePtr host_;
};

struct FakeEventState {
  struct Recorded {
    Stream stream;
    std::shared_ptr<bool> complete;
  };
  std::vector<Recorded> recorded;
  int synchronizations = 0;

  void complete_all() {
    for (auto& r : recorded) *r.complete = true;
  }
  void complete_stream(Stream s) {
    for (auto& r : recorded)
      if (r.stream == s) *r.complete = true;
  }
  std::size_t num_incomplete() const {
    std::size_t n = 0;
    for (auto& r : recorded) n += !*r.complete;
    return n;
  }
};

class FakeEventSource final : public StreamEventSource {
 public:
  explicit FakeEventSource(std::shared_ptr<FakeEventState> state) : state_(std::move(state)) {}

  std::unique_ptr<StreamEvent> record(Stream stream) override {
    auto flag = std::make_shared<bool>(false);
    state_->recorded.push_back({stream, flag});
    return std::make_unique<Event>(state_, flag);
  }

 private:
  class Event final : public StreamEvent {
   public:
    Event(std::shared_ptr<FakeEventState> state, std::shared_ptr<bool> complete)
        : state_(std::move(state)), complete_(std::move(complete)) {}
    bool query() override { return *complete_; }
    // Waiting on the fake "device" lets its work finish.
    void synchronize() override {
      ++state_->synchronizations;
      *complete_ = true;
    }

   private:
    std::shared_ptr<FakeEventState> state_;
    std::shared_ptr<bool> complete_;
  };
  std::shared_ptr<FakeEventState> state_;
};

// An allocator over the fakes, with handles on both.
struct FakeAllocator {
  std::shared_ptr<FakeSourceState> source = std::make_shared<FakeSourceState>();
  std::shared_ptr<FakeEventState> events = std::make_shared<FakeEventState>();
  std::shared_ptr<CachingAllocator> alloc;

  explicit FakeAllocator(CachingAllocatorConfig config = {}, std::size_t capacity = SIZE_MAX) {
    source->capacity = capacity;
    alloc = std::make_shared<CachingAllocator>(std::make_unique<FakeMemorySource>(source),
                                               std::make_unique<FakeEventSource>(events), config);
  }
  CachingAllocator* operator->() const { return alloc.get(); }
};

}  // namespace zrt::test
