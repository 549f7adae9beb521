// A checkpoint index validated as a whole (Note [Checkpoint format]): every
// number of index.json against the others, so an index that parses but lies
// (a shifted offset, swapped ranks, a step that is not the step) is refused
// before a shard is read, instead of loading wrong weights.
#pragma once

#include <string>

#include "zrt/optim/checkpoint/checkpoint_index.h"

namespace zrt::optim {

// CheckpointError naming `source` unless this zrt reads format `version`.
void check_format_version(int version, const std::string& source);

// CheckpointError naming `source` and the field of the first failure of:
//   header   a known version, strategy and compute dtype (f32, bf16, f16);
//            world_size >= 1; zero3_size divides it and is what the strategy
//            records (no-shard 1, full and grad-op the world); step ==
//            state.next_step >= 0.
//   handles  unique non-empty names; zero1_size as the strategy shards
//            (strategy_groups); at least one parameter; parameter names
//            unique over the whole index; offsets and numel_padded exactly
//            what FlatParamLayout gives the listed shapes in the compute dtype
//            (Note [Flat parameter layout]: each parameter aligned after the
//            one before it, the total padded to the zero1 size).
//   ranks    world_size records, rank i i-th; zero1_rank and whether a file
//            is written as strategy_rank_place says, so each zero1 shard has
//            exactly one writer; a writer's file is rank_file_name(rank) and
//            lists exactly "<handle>.<kind>" of every handle and kind, each F32
//            [shard numel] with a 16-hex-digit checksum, in a file of at least
//            their bytes; a replica lists no file, no tensor and 0 bytes.
//   state    counters >= 0, consecutive_skips <= skipped_total; a loss scaler
//            exactly when the dtype is f16, its scale finite and > 0, its
//            counters >= 0.
// Left to other checks: the checksums' values (reading the shards), names and
// shapes that a layout cannot tell apart (the model check on load), and
// optimizer_step or skipped_total against next_step (no invariant ties them:
// save_checkpoint takes the step number from its caller, and a fine-tuning
// run restarts its steps over loaded counters).
void validate_index(const CheckpointIndex& index, const std::string& source);

}  // namespace zrt::optim
