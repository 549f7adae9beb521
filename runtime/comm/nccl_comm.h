// The NCCL backend for CUDA tensors: the engine for multi-GPU and multi-node.
//
// Collectives are enqueued on the caller's stream and return (Note
// [Collective contract]). Communicators are non-blocking (ncclConfig_t
// blocking = 0): every NCCL call that may wait (init, enqueue, split) is
// followed by polling ncclCommGetAsyncError until the communicator's
// timeout, and on expiry the communicator is aborted (ncclCommAbort) and
// CommError thrown. Host-synchronous calls (barrier, all_gather_bytes) wait
// for their stream through the comm watchdog (Note [Comm watchdog]), for
// which this backend's async_error() is ncclCommGetAsyncError and abort()
// is ncclCommAbort.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "zrt/runtime/comm/communicator.h"

namespace zrt {

// Collective over `bootstrap` (e.g. the MPI world, or a size-1 local world):
// rank 0 makes the NCCL unique id, all_gather_bytes shares it, and every rank
// joins a new NCCL communicator of bootstrap.size() ranks on cuda:`device`
// with bootstrap's rank and timeout. Throws InvalidState in a build without NCCL.
CommPtr make_nccl_communicator(Communicator& bootstrap, int device, std::string name = "world");

// Every rank's bytes in rank order: the exchange that shares the unique id.
using BytesAllGather =
    std::function<std::vector<std::vector<std::byte>>(std::span<const std::byte>)>;

// The same over any bootstrap exchange (e.g. TcpRendezvous::all_gather_bytes
// for a torchrun-style launch): rank `rank` of `size` on cuda:`device`.
CommPtr make_nccl_communicator(const BytesAllGather& all_gather_bytes, int rank, int size,
                               int device, std::chrono::milliseconds timeout,
                               std::string name = "world");

}  // namespace zrt
