// Where a caching allocator gets its memory from, separate from how it caches
// it (see caching_allocator.h): cudaMalloc on one device, pinned host memory
// for offload, or plain aligned host memory (which is also what CPU tests run
// the caching policy on).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "zrt/runtime/device.h"
#include "zrt/runtime/stream.h"

namespace zrt {

class RawMemorySource {
 public:
  virtual ~RawMemorySource() = default;
  // Returns `nbytes` (> 0) of memory aligned to at least 512 bytes, or nullptr
  // when the source is out of memory. Other failures (a broken CUDA context)
  // throw. Not called concurrently: the caching allocator serialises calls.
  virtual void* allocate(std::size_t nbytes) = 0;
  // Returns memory from allocate(). Never throws.
  virtual void free(void* ptr) noexcept = 0;
  // The device the memory lives on (cpu for pinned host memory).
  virtual Device device() const = 0;
  // Pinned host memory (Allocator::page_locked).
  virtual bool page_locked() const { return false; }
  // Bytes the source still has, when it knows (free device memory on CUDA).
  virtual std::optional<std::size_t> free_bytes() const { return std::nullopt; }
  // Short name for messages, e.g. "cudaMalloc on cuda:0".
  virtual const char* name() const = 0;
  // Sets `nbytes` at `ptr` to `byte` in `stream`'s order (poisoning, Note
  // [Poisoned memory]). Host memory: on a CPU stream (work on a CUDA stream
  // may still use pinned memory: left alone). Device memory: cudaMemsetAsync.
  virtual void fill(void* ptr, std::size_t nbytes, unsigned char byte, Stream stream);
};

using RawMemorySourcePtr = std::unique_ptr<RawMemorySource>;

// Plain host memory, 512-byte aligned (aligned_alloc).
RawMemorySourcePtr make_host_memory_source();
// cudaMalloc / cudaFree on cuda:`device`. Throws InvalidArgument in a build
// without CUDA.
RawMemorySourcePtr make_cuda_memory_source(int device);
// Page-locked host memory (cudaHostAlloc), usable by copies on any device's
// streams. Throws InvalidArgument in a build without CUDA.
RawMemorySourcePtr make_pinned_host_memory_source();
// Distinct addresses and no memory behind them (Note [Dry runs] in
// model_zoo/trainer/memory_plan.h): a caching allocator over it keeps its
// policy and counters exactly while nothing is allocated. Its blocks must
// never be read or written (they fault); fill() does nothing.
RawMemorySourcePtr make_unbacked_memory_source();

}  // namespace zrt
