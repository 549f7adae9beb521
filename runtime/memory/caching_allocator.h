// The caching allocator: keeps memory it got from a raw source (raw_memory_source.h)
// and hands it out again, so the steady state of a training step makes no
// cudaMalloc / cudaFree calls. The policy here knows nothing about CUDA; the
// raw source and the stream events (stream_events.h) are plugged in, which is
// how CPU tests exercise the same policy the GPU runs.
//
// Policy, in short: requests are rounded (block_sizes.h) and served from a
// small pool (<= 1 MiB, packed into 2 MiB segments) or a large pool (segments
// of the request rounded to 2 MiB). Free blocks are kept per pool and per
// stream; a request takes the best fit (the smallest free block of its stream
// that is big enough; among equals the one made first, the lowest offset of
// the oldest segment, never by address, so the same requests give the same
// blocks over any raw source), splitting off the rest when worth it; a freed block
// merges with free neighbours of its segment. When the raw source fails or the
// memory cap would be exceeded, the cache is flushed (held blocks' events
// waited for with the lock released, Note [No lock held while waiting];
// whole free segments returned), a free block looked for again and the raw
// allocation retried once before OutOfMemory is thrown. On an owned CPU
// stream, a request no free block fits first waits for the stream's queued
// tasks to give back what they hold (Note [Allocations wait for their
// stream's frees]).
//
// Note [Explicit cross-stream lifetimes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A block belongs to the stream it was allocated on: once freed, only that
// stream gets it again, and stream order makes that safe without any sync
// (work on the stream that used the old contents runs before work that uses
// the new ones). Other streams that touch the block (an all-gather stream
// writing a buffer the compute stream allocated, a copy stream offloading a
// gradient) must be declared with Allocator::record_use before the free. At
// deallocate the allocator records one event on each declared stream and holds
// the block — it is in no free list — until all those events have completed;
// then it returns to its stream's free list. Nothing is inferred: there is no
// recordStream-style hidden lifetime extension, no tensor keeps a block alive
// behind the caller's back, and the bytes held at any point follow from the
// program's own frees and record_use calls, so memory use is deterministic
// and reproducible from run to run. Forgetting record_use is a bug in the
// caller (a data race), not something the allocator papers over. empty_cache,
// the out-of-memory retry and the destructor wait for held blocks' events.
//
// Note [Allocations wait for their stream's frees]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On CUDA a tensor the host frees after issuing its last reader is its
// stream's again at once: the next allocation on that stream reuses it, in
// stream order. On an owned CPU stream the queued reader holds the memory
// (Tensor::issue_view, Note [CPU streams]) until it runs, so the block comes
// back only then; a host far ahead of its stream held every block the step
// allocated (under activation checkpointing, 8 times the plan's peak). So an
// allocation on an owned CPU stream that finds no free block waits for that
// stream's tasks one at a time (CpuStream::wait_for_a_task), taking back
// what each freed, until a free block fits; only when the queue is empty
// (or stalls, below) does it take new memory from the source. So the pool grows only where
// frees in issue order would not serve, as on CUDA and as the plan counts,
// and the host waits no longer than the fit needs. The wait is made with
// the lock released, and never on a CPU stream's thread (a task must not wait for
// tasks). It is no plain wait for work that may hold collectives (Note
// [Comm watchdog]): a task that does not finish within queue_stall is given
// up on, once, and the pool grows, so a collective that never ends is named
// by the host's next watched wait, as before. An Allocator wrapping this one
// must not hold, across allocate, a lock its deallocate takes: a task's
// frees call it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "zrt/runtime/allocator.h"
#include "zrt/runtime/device.h"
#include "zrt/runtime/memory/raw_memory_source.h"
#include "zrt/runtime/memory/stream_events.h"
#include "zrt/runtime/stream.h"

namespace zrt {

// Note [Poisoned memory]
// ~~~~~~~~~~~~~~~~~~~~~~
// A missing wait between two streams reads memory at the wrong time, which
// goes unnoticed when the memory happens to hold the right numbers. With
// poison on, the allocator fills every block it hands out with 0xFF bytes,
// in the allocating stream's order: NaN in every float dtype (and -1 in the
// integers), so a reader that did not wait for its producer reads NaN, and a
// result that depends on it changes. A block taken back on the default CPU
// stream (complete at once, after its declared uses' events) is poisoned
// again then, so a reader that outlives a free it was not declared to
// (record_use) reads NaN too. Blocks of owned streams are poisoned only when
// handed out again: their last readers may still be queued on that stream.
// On by config, or for every caching allocator with ZRT_POISON_MEMORY=1;
// the equivalence tests run with it, and must stay bit-identical.
struct CachingAllocatorConfig {
  // Upper bound on reserved bytes (memory held from the raw source); 0 = none.
  std::size_t memory_cap = 0;
  // Note [Poisoned memory]. make_caching_allocator also turns it on when
  // ZRT_POISON_MEMORY=1.
  bool poison = false;
  // How long an allocation waits for a queued task of its CPU stream that
  // does not finish before it grows the pool instead (Note [Allocations
  // wait for their stream's frees]): longer than a task's kernels take, far
  // shorter than a collective's timeout.
  std::chrono::milliseconds queue_stall{10'000};
};

// Thread-safe (one mutex). Each rank owns its own: there is no process-wide cache.
class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(RawMemorySourcePtr source, StreamEventSourcePtr events,
                   CachingAllocatorConfig config = {});
  // Waits for held blocks' events, then releases every segment (also those of
  // blocks never deallocated) to the raw source. Never throws.
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Throws InvalidArgument for 0 or absurdly large (> 2^50) requests and
  // OutOfMemory when the raw source or the cap leaves no room after a flush.
  // May wait for `stream`'s queued work (Note [Allocations wait for their
  // stream's frees]).
  void* allocate(std::size_t nbytes, Stream stream) override;
  void deallocate(void* ptr) noexcept override;
  // See Note [Explicit cross-stream lifetimes]. Throws InvalidArgument for a
  // pointer this allocator did not hand out (or already took back).
  void record_use(void* ptr, Stream stream) override;
  Device device() const override;
  bool page_locked() const override;
  MemoryStats stats() const override;
  // Waits for the events of held blocks, then returns every fully free
  // segment to the raw source.
  void empty_cache() override;
  void reset_peak_stats() override;
  const CachingAllocatorConfig& config() const { return config_; }

 private:
  struct State;
  CachingAllocatorConfig config_;
  std::unique_ptr<State> state_;
};

// ZRT_POISON_MEMORY: true for "1", false unset, empty or "0"; InvalidArgument
// naming the value otherwise.
bool env_poison_memory();

// A caching allocator over cudaMalloc on cuda:N, or over plain aligned host
// memory for cpu, with events on the streams' devices.
AllocatorPtr make_caching_allocator(Device device, CachingAllocatorConfig config = {});
// A caching allocator over pinned host memory (device() is cpu), for offload
// buffers that copies on CUDA streams read and write. Needs a CUDA build.
AllocatorPtr make_pinned_host_allocator(CachingAllocatorConfig config = {});
// A caching allocator for cpu over make_unbacked_memory_source(): what a dry
// run allocates from (Note [Dry runs]). Never poisons (there is nothing to
// fill), whatever ZRT_POISON_MEMORY says.
AllocatorPtr make_unbacked_caching_allocator(CachingAllocatorConfig config = {});

}  // namespace zrt
