// A save split in two (Note [Checkpoints saved in the background]): the
// snapshot, which reads the module at one moment, and the write, which needs
// nothing of the module and so may run while training goes on.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "zrt/optim/checkpoint/checkpoint_index.h"
#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/runtime/comm/communicator.h"

namespace zrt::optim {

// One rank's part of a checkpoint step.
struct CheckpointSnapshot {
  std::int64_t next_step = 0;
  CheckpointSaveOptions options;
  bool writes_file = false;  // false: a replica leaves its shards to replica 0
  std::map<std::string, Tensor>
      tensors;            // this rank's file by tensor name (bf16 widened as written)
  RankRecord record;      // rank and zero1 rank; the write fills the rest
  CheckpointIndex index;  // all but `ranks` (rank 0 commits it)
  // Set when taking the snapshot failed on this rank: the write reports it
  // as that rank's failure, so every rank fails the save alike.
  std::string error;
};

// Host buffers a snapshot copies into, kept from one save to the next so
// that only the first save faults their pages in (pinned on CUDA, so the
// copies down are fast).
class SnapshotStaging {
 public:
  // A host tensor of t's shape and dtype under `name`, holding t's values:
  // at once for a host tensor, once `stream` is synchronized for a device
  // tensor (the copy is issued on it). bf16 moments stay bf16, a plain copy
  // like f32 state's (on CUDA into pinned memory), and are widened to the
  // checkpoint's f32 by the thread that writes them (Note [Checkpoints
  // saved in the background]).
  Tensor stage(const std::string& name, const Tensor& t, Stream stream);
  std::uint64_t bytes() const;  // held, summed over every buffer

 private:
  std::map<std::string, Tensor> buffers_;
  AllocatorPtr pinned_;  // made for the first device tensor
};

// Reads the module's state (after synchronizing it) as step `next_step`.
// Without staging the tensors are the live shards themselves, valid until
// the module's next step; with it, copies that stay valid.
CheckpointSnapshot take_snapshot(ZeroModule& module, std::int64_t next_step,
                                 const CheckpointSaveOptions& options, SnapshotStaging* staging);

// Collective over `comm` (the module's world or a group of the same ranks
// in the same order): writes the snapshot as a step directory, atomically
// and agreed on by every rank (Note [Atomic checkpoint steps], Note [Ranks
// agree on checkpoints]). Returns the step directory.
std::string write_snapshot(Communicator& comm, const CheckpointSnapshot& snapshot);

}  // namespace zrt::optim
