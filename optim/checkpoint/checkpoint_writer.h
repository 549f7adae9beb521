// Writing a checkpoint step (Note [Atomic checkpoint steps]): the step's
// temporary directory, each rank's file with its checksums, and the commit
// that makes the step visible.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "zrt/optim/checkpoint/checkpoint_index.h"
#include "zrt/runtime/tensor.h"

namespace zrt::optim {

std::string step_dir(const std::string& root, std::int64_t step);      // root/step-000120
std::string step_tmp_dir(const std::string& root, std::int64_t step);  // root/step-000120.tmp

// Creates root (and parents), removes stale temporaries of ours, and creates
// an empty step_tmp_dir. CheckpointError naming the path.
void begin_step(const std::string& root, std::int64_t step);

// Writes `tensors` (any device; f32, bf16 or f16) to `path` as plain
// safetensors in f32, the dtype rank files hold, and fsyncs it. A tensor of
// another dtype (bf16 moments: Note [bf16 AdamW moments]) is widened on the
// host as it is written, kWidenElements at a time, so a save staged in bf16
// is widened by the thread that writes it. Fills `record.tensors` (dtype,
// shape, xxh64 of the stored bytes) and `record.bytes`.
inline constexpr std::int64_t kWidenElements = std::int64_t(1) << 20;
void write_rank_file(const std::string& path, const std::map<std::string, Tensor>& tensors,
                     RankRecord& record);

// Once every rank file is in the step's temporary directory: validates the
// index (validate_index), writes index.json and its index.json.xxh64, fsyncs
// the directory, renames it into place, publishes `latest` (with the index
// checksum), then prunes to `keep_last` steps (0: keep all). Returns the
// step directory.
std::string commit_step(const std::string& root, const CheckpointIndex& index, int keep_last);

}  // namespace zrt::optim
