// Checkpoints written while training goes on (Note [Checkpoints saved in the
// background]).
//
// Note [Checkpoints saved in the background]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A save is a snapshot and a write (checkpoint_snapshot.h). Here the
// snapshot copies this rank's shards and moments into staging buffers that
// live from one save to the next (host memory, pinned on CUDA): that copy,
// after waiting for the module's streams, is the only pause of training.
// Each tensor is staged in its own dtype: bf16 moments (Note [bf16 AdamW
// moments]) take the plain copy f32 state takes (on CUDA a copy into pinned
// memory, no cast on the training thread), and the writer widens them to
// the checkpoint's f32 a slice at a time as it writes (write_rank_file).
// Widening before the copy instead would copy twice the bytes in the pause,
// stage twice the bytes and need device scratch to widen into; widening on
// the writer's thread costs a pass over the moments while training goes on.
// A thread of the saver then writes the snapshot exactly as a synchronous
// save does (rank files with checksums, fsync, index, rename, `latest`,
// pruning: Note [Atomic checkpoint steps]), so a kill at any moment leaves
// what it leaves after a synchronous save. Its agreements (Note [Ranks agree
// on checkpoints]) run on a communicator of the saver's own, split when the
// saver is made, so they never interleave with training's collectives (and
// recording in a flight-recorder ring of its own, so a report of a hang
// shows where training is, not the writer). It is split from a communicator
// whose collectives stay on the host: the world, or beside an NCCL world
// (device tensors only) the host communicator the caller gives (the MPI
// world it was bootstrapped over, World::bootstrap). NCCL collectives of two
// communicators in flight at once, on two threads' streams, may deadlock
// the GPU (NCCL's documentation: kernels of each wait for their peers, and
// neither is guaranteed to progress), so a saver beside an NCCL world
// without a host communicator is refused rather than left to chance. One save is in
// flight at a time: the next save and wait() wait for it and throw its
// CheckpointError, the same on every rank, and so do load_checkpoint and
// save_checkpoint of its module (Note [Checkpoints wait for the save in
// flight]; Trainer::resume waits too);
// a snapshot that fails on one rank (staging memory) fails that save on
// every rank through the same agreement. The price is host memory: this
// rank's shards and moments as they live (staging_bytes(): 12 bytes per
// parameter of its shard, 8 with bf16 moments).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "zrt/optim/checkpoint/checkpoint_snapshot.h"

namespace zrt::optim {

class BackgroundCheckpointSaver {
 public:
  // Collective over `host` when given, else over module.world() (it splits
  // a communicator of its own from it). `host`: the world's ranks in the
  // same order over a transport that keeps to the host; needed beside a
  // world that takes only device tensors (NCCL), InvalidArgument without it.
  // The module must outlive the saver; it has one saver at a time.
  explicit BackgroundCheckpointSaver(ZeroModule& module, Communicator* host = nullptr);
  // Waits for the save in flight; an error nobody collected goes to stderr.
  ~BackgroundCheckpointSaver();
  BackgroundCheckpointSaver(const BackgroundCheckpointSaver&) = delete;
  BackgroundCheckpointSaver& operator=(const BackgroundCheckpointSaver&) = delete;

  // Every rank: waits for the previous save (throwing its error), copies the
  // module's state as step `next_step` into staging and returns while a
  // thread writes it. Returns the step directory it will be.
  std::string save(std::int64_t next_step, const CheckpointSaveOptions& options);
  // Waits for the save in flight and returns its step directory ("" when
  // none was in flight); CheckpointError (alike on every rank) when it failed.
  std::string wait();
  bool in_flight() const { return worker_.joinable(); }
  // Host memory the staging buffers hold.
  std::uint64_t staging_bytes() const { return staging_.bytes(); }

 private:
  ZeroModule& module_;
  std::weak_ptr<const bool> module_alive_;  // expired once the module is destroyed
  std::unique_ptr<Communicator> comm_;      // the writes' agreements only
  SnapshotStaging staging_;
  CheckpointSnapshot snapshot_;  // of the save in flight
  std::thread worker_;
  std::string result_;        // the worker's step directory, or
  std::exception_ptr error_;  // what it threw
};

}  // namespace zrt::optim
