// Staging of device tensors through host memory for the backends whose data
// path runs on the CPU (local, and MPI without CUDA-aware transport). On cpu
// tensors every helper is the identity, so the CPU path pays nothing.
#pragma once

#include <mutex>

#include "zrt/runtime/tensor.h"

namespace zrt {

// Where staging tensors come from: in a CUDA build, a caching allocator over
// pinned (page-locked) host memory, so device<->host copies run at full DMA
// speed and the blocks are reused across collectives; made on first use, so
// a run that stages nothing never touches CUDA. Without CUDA, plain host
// memory. Shared by a communicator and its splits; thread-safe.
class HostStagingPool {
 public:
  AllocatorPtr allocator();

 private:
  std::once_flag once_;
  AllocatorPtr allocator_;
};

// A host view of `t`: itself on cpu, else a host copy taken after the work
// already issued to `stream` (from `pool`, or pageable memory without one).
Tensor host_input(const Tensor& t, Stream stream, HostStagingPool* pool = nullptr);
// Host memory to write `t`'s result into: itself on cpu, else a staging tensor.
Tensor host_output(const Tensor& t, HostStagingPool* pool = nullptr);
// A new host tensor shaped like `t`, from `pool` when given.
Tensor host_staging_like(const Tensor& t, HostStagingPool* pool);
// Copies a staged result back into its device tensor, ordered on `stream`
// (nothing to do on cpu).
void finish_output(const Tensor& t, const Tensor& host, Stream stream);

// The first byte of `t`, or nullptr for an empty tensor (whose storage may
// hold no memory at all).
const std::byte* bytes_of(const Tensor& t);
std::byte* mutable_bytes_of(const Tensor& t);

}  // namespace zrt
