// The allocator interface every Storage draws from, and zrt's stateless
// default allocators. Caching lives in caching_allocator.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "zrt/runtime/device.h"
#include "zrt/runtime/stream.h"

namespace zrt {

// Counters an allocator keeps. All in bytes except the counts.
struct MemoryStats {
  std::size_t allocated = 0;  // handed out and not yet freed (rounded sizes)
  std::size_t reserved = 0;   // held from the raw source (allocated + cached)
  std::size_t peak_allocated = 0;
  std::size_t peak_reserved = 0;
  std::size_t requested = 0;         // sum of live requests before rounding
  std::uint64_t num_allocs = 0;      // allocate() calls served
  std::uint64_t num_frees = 0;       // deallocate() calls
  std::uint64_t num_raw_allocs = 0;  // calls into the raw source
  std::uint64_t num_raw_frees = 0;
  std::uint64_t num_oom_retries = 0;  // cache flushes after a raw allocation failed
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least `nbytes` bytes (nbytes > 0) usable on `stream`, aligned to
  // at least 64 bytes. Throws OutOfMemory.
  virtual void* allocate(std::size_t nbytes, Stream stream) = 0;
  // allocate() for `holder`, the object that will hold the memory (Storage
  // passes itself). An allocator that attributes its blocks to their holders
  // in O(1) (the memory plan's breakdown, Note [Memory plan]) overrides it;
  // the rest ignore the holder.
  virtual void* allocate_for(const void* /*holder*/, std::size_t nbytes, Stream stream) {
    return allocate(nbytes, stream);
  }
  // Returns memory from allocate(). Never throws.
  virtual void deallocate(void* ptr) noexcept = 0;
  // Declares that `ptr` is also used on `stream` (besides its allocation
  // stream): a caching allocator will not hand the block out again until the
  // work issued to `stream` before the free has completed. Explicit, never
  // inferred; a no-op for allocators that free at once.
  virtual void record_use(void* /*ptr*/, Stream /*stream*/) {}
  virtual Device device() const = 0;
  // Host memory that a CUDA copy reads or writes without staging (pinned,
  // cudaHostAlloc): what Tensor::copy_async_ needs on its host side.
  virtual bool page_locked() const { return false; }
  virtual MemoryStats stats() const { return {}; }
  // Returns cached memory that no block uses to the raw source (a no-op for
  // allocators without a cache).
  virtual void empty_cache() {}
  // Restarts peak_allocated / peak_reserved from the current values.
  virtual void reset_peak_stats() {}
};

using AllocatorPtr = std::shared_ptr<Allocator>;

// The stateless allocator zrt uses when none is given: 64-byte aligned host
// memory for cpu, plain cudaMalloc/cudaFree for cuda:N. They keep no counters
// and no cache, so sharing them between ranks of one process is safe.
AllocatorPtr default_allocator(Device device);

// Host memory for large buffers filled at full speed (a checkpoint's
// tensors as they are read): allocations of 2 MiB and more are 2 MiB-aligned
// and ask for transparent huge pages (madvise), so filling them takes a
// page fault per 2 MiB instead of per 4 KiB. Stateless, like the default.
AllocatorPtr huge_page_host_allocator();

}  // namespace zrt
