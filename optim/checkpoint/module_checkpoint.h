// Saving and loading a ZeroModule's whole state (any model on it: the
// model zoo's TrainingEngine or one's own), collectively over its
// world (Note [Checkpoint format], Note [Atomic checkpoint steps]).
//
// Note [Ranks agree on checkpoints]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every phase that can fail on one rank (creating the step directory, writing
// a rank file, committing the index; reading, verifying and staging on load)
// ends in an exchange of each rank's error text (all_gather_bytes). If any
// rank failed, every rank throws the same CheckpointError naming the first
// failing rank and its message, so no rank reports a save alone, and a
// failed save leaves no step directory behind. A load stages everything on
// the host first and changes live state only after every rank agreed that
// its staging succeeded: a bad checkpoint leaves the module untouched.
// The ranks must name one checkpoint: a load compares the digests of the
// indexes the ranks read (a byte-identical copy of the step passes), and a
// save refuses a step number other than rank 0's and names a root other
// than rank 0's where rank 0's step directory is not found under it, since
// shards of two checkpoints would make one model of both without a word.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "zrt/optim/checkpoint/checkpoint_index.h"
#include "zrt/optim/zero_module.h"

namespace zrt::optim {

struct CheckpointSaveOptions {
  std::string root{};           // DIR: steps go to DIR/step-NNNNNN
  int keep_last = 0;            // > 0: prune to this many steps after the save
  std::string run_json = "{}";  // the run's flags and model config, stored as given
  // Called on every rank just before it writes its file (fault injection).
  std::function<void(int rank)> before_write{};
};

// Options that save into `root`, pruning to `keep_last` steps (0: keep all).
inline CheckpointSaveOptions checkpoint_into(std::string root, int keep_last = 0) {
  CheckpointSaveOptions o;
  o.root = std::move(root);
  o.keep_last = keep_last;
  return o;
}

// Collective over module.world(): saves the module's state as step
// `next_step` (the step a resumed run trains next). Returns the step
// directory on every rank; CheckpointError alike on every rank on failure.
std::string save_checkpoint(ZeroModule& module, std::int64_t next_step,
                            const CheckpointSaveOptions& options);

// Collective: loads a checkpoint (a step directory, or a root's `latest`)
// saved under any world size, strategy or dtype of the same model, into the
// module; returns its training state (and the run's JSON when asked). Every
// scope must be closed; gradients accumulated before it are discarded (they
// belong to the weights it replaces).
TrainingState load_checkpoint(ZeroModule& module, const std::string& path,
                              std::string* run_json = nullptr);

}  // namespace zrt::optim
