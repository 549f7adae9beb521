#include "zrt/runtime/memory/caching_allocator.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "zrt/runtime/cpu_stream.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/memory/address_space.h"
#include "zrt/runtime/memory/block_sizes.h"

namespace zrt {

// Named, not anonymous: CachingAllocator::State holds these types, and a
// member's type in an anonymous namespace warns (-Wsubobject-linkage) once a
// unity build includes this file in another.
namespace caching_allocator_blocks {

using namespace block_sizes;

// A run of bytes inside one segment. The blocks of a segment form a doubly
// linked list in address order; the first block (prev == nullptr) is the
// segment's head, and merging always keeps the lower block, so a head lives
// as long as its segment.
struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;
  Stream stream;
  bool small = false;
  bool allocated = false;
  std::size_t requested = 0;  // the caller's size while allocated
  std::vector<Stream> uses;   // streams declared by record_use while allocated
  int pending_events = 0;     // events to complete before the block is free again
  Block* prev = nullptr;
  Block* next = nullptr;
  std::uint64_t segment = 0;  // its segment's number, in the order segments were made
  std::size_t offset = 0;     // bytes from its segment's start

  bool is_free() const { return !allocated && pending_events == 0; }
  bool is_whole_segment() const { return prev == nullptr && next == nullptr; }
};

auto stream_key(const Stream& s) {
  return std::make_tuple(static_cast<int>(s.device().kind), s.device().index, s.id());
}

// Free blocks ordered by stream, then size, then place (segment number and
// offset): lower_bound on (stream, size) finds the best fit of that stream.
// Equal sizes are told apart by place, not address, so which block serves a
// request does not depend on where the raw source put its segments: the
// same requests give the same blocks over any source (a dry run's unbacked
// one included, Note [Dry runs]).
struct BestFitOrder {
  bool operator()(const Block* a, const Block* b) const {
    auto ka = std::make_tuple(stream_key(a->stream), a->size, a->segment, a->offset);
    auto kb = std::make_tuple(stream_key(b->stream), b->size, b->segment, b->offset);
    return ka < kb;
  }
};

// Every byte of a poisoned block: NaN in each float dtype (Note [Poisoned memory]).
constexpr unsigned char kPoisonByte = 0xFF;

struct PendingEvent {
  std::shared_ptr<StreamEvent> event;  // shared: waited on outside the lock
  Block* block;
};

std::string bytes_str(std::size_t n) {
  return detail::concat(n, " bytes (", static_cast<double>(n) / double(1 << 20), " MiB)");
}

}  // namespace caching_allocator_blocks

using namespace caching_allocator_blocks;

struct CachingAllocator::State {
  RawMemorySourcePtr source;
  StreamEventSourcePtr events;
  std::size_t cap = 0;
  bool poison = false;                      // Note [Poisoned memory]
  std::chrono::milliseconds queue_stall{};  // CachingAllocatorConfig::queue_stall

  mutable std::mutex mu;
  MemoryStats stats;
  std::set<Block*, BestFitOrder> free_small, free_large;
  std::unordered_map<void*, Block*> allocated;  // by ptr
  std::set<Block*> segments;                    // heads
  std::uint64_t segments_made = 0;              // numbers the segments (Block::segment)
  std::deque<PendingEvent> pending;

  std::set<Block*, BestFitOrder>& pool(bool small) { return small ? free_small : free_large; }

  // --- free lists ---------------------------------------------------------

  Block* take_best_fit(bool small, Stream stream, std::size_t size) {
    auto& free = pool(small);
    Block probe;
    probe.stream = stream;
    probe.size = size;
    probe.ptr = nullptr;
    auto it = free.lower_bound(&probe);
    if (it == free.end() || !((*it)->stream == stream)) return nullptr;
    Block* b = *it;
    free.erase(it);
    return b;
  }

  // Cuts `b` to `size` when the rest is worth keeping as its own free block.
  void maybe_split(Block* b, std::size_t size) {
    std::size_t remaining = b->size - size;
    if (!should_split(b->small, remaining)) return;
    auto rest = std::make_unique<Block>();
    rest->ptr = static_cast<char*>(b->ptr) + size;
    rest->size = remaining;
    rest->stream = b->stream;
    rest->small = b->small;
    rest->segment = b->segment;
    rest->offset = b->offset + size;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest.get();
    b->next = rest.get();
    b->size = size;
    pool(b->small).insert(rest.release());
  }

  // Makes `b` free: merges it with free neighbours, then lists it.
  // `poison`: the block is taken back (not flushed) and poisoning is on.
  void release_block(Block* b, bool poison) {
    b->allocated = false;
    b->uses.clear();
    if (poison && b->stream == Stream()) source->fill(b->ptr, b->size, kPoisonByte, b->stream);
    if (b->next && b->next->is_free()) absorb_next(b);
    if (b->prev && b->prev->is_free()) {
      Block* prev = b->prev;
      pool(prev->small).erase(prev);
      absorb_next(prev);
      b = prev;
    }
    pool(b->small).insert(b);
  }

  // Merges b->next (free, listed) into b and deletes it.
  void absorb_next(Block* b) {
    Block* n = b->next;
    pool(n->small).erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }

  // --- events -------------------------------------------------------------

  void event_done(Block* b, bool poison) {
    if (--b->pending_events == 0) release_block(b, poison);
  }

  // Frees the held blocks whose events have all completed; `poison` as for
  // release_block (a flush releases without poisoning).
  void process_events(bool poison) {
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->event->query()) {
        Block* b = it->block;
        it = pending.erase(it);
        event_done(b, poison);
      } else {
        ++it;
      }
    }
  }

  // Note [No lock held while waiting]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Waits for the events of the blocks held so far, then frees those blocks,
  // with the lock released while it waits: a CPU stream reaches an event
  // only by running the work queued before it, and that work frees tensors
  // (deallocate takes the lock), so waiting under the lock would wait for
  // ever (an allocation over the cap under --cpu-streams all did). The held
  // blocks stay in `pending` meanwhile (the events are shared, and waited
  // on as copies), so another thread's out-of-memory retry waits for them
  // too instead of finding nothing to flush. `lock` is held on entry and on
  // return.
  void synchronize_events(std::unique_lock<std::mutex>& lock) {
    std::vector<std::shared_ptr<StreamEvent>> events;
    events.reserve(pending.size());
    for (const PendingEvent& p : pending) events.push_back(p.event);
    lock.unlock();
    std::exception_ptr failure;
    try {
      for (const auto& e : events) e->synchronize();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure) std::rethrow_exception(failure);
    process_events(false);  // flushing: the segments may go back to the source
  }

  // Note [Allocations wait for their stream's frees]: waits for `stream`'s
  // queued tasks one at a time, taking back what each freed, until a free
  // block fits; nullptr once the queue is empty or stalls.
  Block* take_after_queue(bool small, Stream stream, std::size_t size,
                          std::unique_lock<std::mutex>& lock) {
    CpuStream* queue = stream.cpu_queue();
    if (queue == nullptr) return nullptr;
    for (;;) {
      lock.unlock();
      const bool ran = queue->wait_for_a_task(queue_stall);
      lock.lock();
      if (!ran) return nullptr;
      process_events(poison);
      if (Block* b = take_best_fit(small, stream, size)) return b;
    }
  }

  // --- raw memory ---------------------------------------------------------

  // A new segment from the raw source, or nullptr (out of memory or over the cap).
  Block* try_new_segment(std::size_t segment, bool small, Stream stream) {
    if (cap != 0 && (segment > cap || stats.reserved > cap - segment)) return nullptr;
    auto head = std::make_unique<Block>();
    head->ptr = source->allocate(segment);
    if (!head->ptr) return nullptr;
    head->size = segment;
    head->stream = stream;
    head->small = small;
    head->segment = ++segments_made;
    ++stats.num_raw_allocs;
    stats.reserved += segment;
    stats.peak_reserved = std::max(stats.peak_reserved, stats.reserved);
    segments.insert(head.get());
    return head.release();
  }

  void release_free_segments() {
    for (bool small : {true, false}) {
      auto& free = pool(small);
      for (auto it = free.begin(); it != free.end();) {
        Block* b = *it;
        if (!b->is_whole_segment()) {
          ++it;
          continue;
        }
        it = free.erase(it);
        segments.erase(b);
        source->free(b->ptr);
        stats.reserved -= b->size;
        ++stats.num_raw_frees;
        delete b;
      }
    }
  }

  [[noreturn]] void throw_out_of_memory(std::size_t nbytes, std::size_t segment) {
    std::optional<std::size_t> free_b = source->free_bytes();
    // Host memory runs out at the address-space limit when one is set, often
    // long before the machine's memory does (Note [Address-space limit]).
    const std::optional<AddressSpaceLimit> as =
        source->device().is_cpu() ? address_space_limit() : std::nullopt;
    OutOfMemory::Numbers n{.requested = nbytes,
                           .allocated = stats.allocated,
                           .reserved = stats.reserved,
                           .free = free_b.value_or(0),
                           .cap = cap,
                           .address_space_limit = as ? as->limit : 0};
    std::string msg = detail::concat(
        "out of memory on ", source->device().str(), " (", source->name(), "): requested ",
        bytes_str(nbytes), ", needing a new segment of ", bytes_str(segment), "; allocated ",
        bytes_str(n.allocated), ", reserved ", bytes_str(n.reserved), ", free ",
        free_b ? bytes_str(*free_b) : std::string("unknown"), ", cap ",
        cap ? bytes_str(cap) : std::string("none"),
        " (the cache was flushed and the allocation retried)",
        as ? "; this process is under " + as->describe() : std::string());
    throw OutOfMemory(std::move(msg), n, __FILE__, __LINE__);
  }

  void release_everything() noexcept {
    for (Block* head : segments) {
      void* ptr = head->ptr;
      for (Block* b = head; b;) {
        Block* next = b->next;
        delete b;
        b = next;
      }
      source->free(ptr);
    }
    segments.clear();
    free_small.clear();
    free_large.clear();
    allocated.clear();
    pending.clear();
  }
};

CachingAllocator::CachingAllocator(RawMemorySourcePtr source, StreamEventSourcePtr events,
                                   CachingAllocatorConfig config)
    : config_(config), state_(std::make_unique<State>()) {
  ZRT_CHECK_ARG(source != nullptr, "CachingAllocator needs a raw memory source");
  ZRT_CHECK_ARG(events != nullptr, "CachingAllocator needs a stream event source");
  state_->source = std::move(source);
  state_->events = std::move(events);
  state_->cap = config.memory_cap;
  state_->poison = config.poison;
  ZRT_CHECK_ARG(config.queue_stall.count() > 0,
                "CachingAllocatorConfig::queue_stall must be positive (got ",
                config.queue_stall.count(), " ms)");
  state_->queue_stall = config.queue_stall;
}

CachingAllocator::~CachingAllocator() {
  std::unique_lock lock(state_->mu);
  try {
    state_->synchronize_events(lock);
  } catch (const std::exception& e) {
    report_in_destructor("~CachingAllocator (waiting for held blocks)", e);
  }
  state_->release_everything();
}

void* CachingAllocator::allocate(std::size_t nbytes, Stream stream) {
  ZRT_CHECK_ARG(nbytes > 0,
                "CachingAllocator::allocate: 0 bytes requested (a freed storage needs no memory)");
  ZRT_CHECK_ARG(nbytes <= kMaxRequest, "CachingAllocator::allocate: request of ", nbytes,
                " bytes exceeds the limit of ", kMaxRequest, " bytes (an overflowed size?)");
  // A device's memory is used on that device's streams (or the cpu stream
  // handle); host memory, pinned for copies, on any device's streams.
  ZRT_CHECK_ARG(device().is_cpu() || stream.is_cpu() || stream.device() == device(),
                "CachingAllocator::allocate: memory on ", device().str(),
                " requested on a stream of ", stream.device().str());
  State& s = *state_;
  std::unique_lock lock(s.mu);
  s.process_events(s.poison);

  const std::size_t size = block_size_for(nbytes);
  const bool small = is_small(size);
  Block* b = s.take_best_fit(small, stream, size);
  if (!b) b = s.take_after_queue(small, stream, size, lock);
  if (!b) {
    const std::size_t segment = segment_size_for(size);
    b = s.try_new_segment(segment, small, stream);
    if (!b) {
      ++s.stats.num_oom_retries;
      s.synchronize_events(lock);
      // Other threads may have freed, or taken, blocks while it waited.
      b = s.take_best_fit(small, stream, size);
      if (!b) {
        s.release_free_segments();
        b = s.try_new_segment(segment, small, stream);
      }
    }
    if (!b) s.throw_out_of_memory(nbytes, segment);
  }
  s.maybe_split(b, size);
  if (s.poison) s.source->fill(b->ptr, nbytes, kPoisonByte, stream);

  b->allocated = true;
  b->requested = nbytes;
  s.allocated.emplace(b->ptr, b);
  s.stats.allocated += b->size;
  s.stats.requested += nbytes;
  s.stats.peak_allocated = std::max(s.stats.peak_allocated, s.stats.allocated);
  ++s.stats.num_allocs;
  return b->ptr;
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (!ptr) return;
  State& s = *state_;
  std::lock_guard lock(s.mu);
  auto it = s.allocated.find(ptr);
  if (it == s.allocated.end()) {
    report_in_destructor(
        "CachingAllocator::deallocate",
        InvalidArgument("pointer was not allocated by this allocator (or freed twice)"));
    return;
  }
  Block* b = it->second;
  s.allocated.erase(it);
  s.stats.allocated -= b->size;
  s.stats.requested -= b->requested;
  ++s.stats.num_frees;
  b->requested = 0;
  b->allocated = false;

  // Hold the block until the declared streams are done with it.
  for (const Stream& use : b->uses) {
    try {
      s.pending.push_back({s.events->record(use), b});
      ++b->pending_events;
    } catch (const std::exception& e) {
      // Without an event there is no way to know when `use` is done: keep the
      // block out of circulation until the allocator is destroyed.
      report_in_destructor("CachingAllocator::deallocate (recording an event)", e);
      ++b->pending_events;
    }
  }
  b->uses.clear();
  if (b->pending_events == 0) s.release_block(b, s.poison);
}

void CachingAllocator::record_use(void* ptr, Stream stream) {
  State& s = *state_;
  std::lock_guard lock(s.mu);
  auto it = s.allocated.find(ptr);
  ZRT_CHECK_ARG(it != s.allocated.end(),
                "CachingAllocator::record_use: pointer was not allocated by this allocator or is "
                "already freed");
  Block* b = it->second;
  if (stream == b->stream) return;
  if (std::find(b->uses.begin(), b->uses.end(), stream) == b->uses.end()) b->uses.push_back(stream);
}

Device CachingAllocator::device() const { return state_->source->device(); }

bool CachingAllocator::page_locked() const { return state_->source->page_locked(); }

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

void CachingAllocator::empty_cache() {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  s.synchronize_events(lock);
  s.release_free_segments();
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(state_->mu);
  state_->stats.peak_allocated = state_->stats.allocated;
  state_->stats.peak_reserved = state_->stats.reserved;
}

bool env_poison_memory() {
  const char* env = std::getenv("ZRT_POISON_MEMORY");
  if (env == nullptr || *env == '\0' || std::string_view(env) == "0") return false;
  ZRT_CHECK_ARG(std::string_view(env) == "1", "ZRT_POISON_MEMORY='", env,
                "' is not one of 0, 1 (1 fills new allocations with NaN bytes)");
  return true;
}

namespace {

CachingAllocatorConfig with_environment(CachingAllocatorConfig config) {
  if (env_poison_memory()) config.poison = true;
  return config;
}

}  // namespace

AllocatorPtr make_caching_allocator(Device device, CachingAllocatorConfig config) {
  config = with_environment(config);
  RawMemorySourcePtr source =
      device.is_cpu() ? make_host_memory_source() : make_cuda_memory_source(device.index);
  return std::make_shared<CachingAllocator>(std::move(source), make_device_event_source(device),
                                            config);
}

AllocatorPtr make_pinned_host_allocator(CachingAllocatorConfig config) {
  config = with_environment(config);
  // Pinned blocks serve host copies (Stream{}: complete at once) and CUDA
  // streams' copies, whose events are their device's.
  return std::make_shared<CachingAllocator>(make_pinned_host_memory_source(),
                                            make_device_event_source(Device::cpu()), config);
}

AllocatorPtr make_unbacked_caching_allocator(CachingAllocatorConfig config) {
  config.poison = false;
  return std::make_shared<CachingAllocator>(make_unbacked_memory_source(),
                                            make_device_event_source(Device::cpu()), config);
}

}  // namespace zrt
