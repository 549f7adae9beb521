// index.json of a checkpoint step: what was saved, by whom, in which layout,
// with a checksum of every tensor, and the training state around it.
//
// Note [Checkpoint format]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// DIR/step-000120/ holds one plain safetensors file per writing rank,
// rank-00003.safetensors, with that rank's fp32 state of every handle:
// "<handle>.zero1_shard", "<handle>.exp_avg", "<handle>.exp_avg_sq" (1-D,
// the zero1 shard's numel, padding included), and index.json, written by rank
// 0 last. The index records the layout that produced the shards (world size,
// strategy, zero3 size, compute dtype; per handle its padded numel, zero1
// size and each parameter's name, shape and offset in the flat parameter;
// per rank which zero1 shard it holds), the dtype, shape and xxHash64 of every
// tensor of every file, the file sizes, the training state (next step,
// optimizer step and skip counters, loss scaler) and the run's flags as an
// opaque JSON object. Ranks holding a replica of a shard another rank writes
// (hybrid replicas, no-shard) write no file. Since every parameter's place in
// the old flat parameters is known, any new layout can be filled from it:
// that is how a checkpoint loads at another world size or strategy.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zrt/optim/loss_scaler.h"
#include "zrt/runtime/dtype.h"
#include "zrt/runtime/tensor.h"

namespace zrt::optim {

inline constexpr int kCheckpointFormatVersion = 1;

enum class ShardKind { param, exp_avg, exp_avg_sq };
inline constexpr ShardKind kAllShardKinds[] = {ShardKind::param, ShardKind::exp_avg, ShardKind::exp_avg_sq};
// "zero1_shard", "exp_avg", "exp_avg_sq"
const char* shard_kind_name(ShardKind kind);
// "<handle>.<kind name>", the tensor's name in a rank file.
std::string shard_tensor_name(const std::string& handle, ShardKind kind);
// "rank-00003.safetensors"
std::string rank_file_name(int rank);

struct TensorRecord {
  DType dtype = DType::f32;
  Shape shape;
  std::string xxh64;  // 16 hex digits of the stored bytes
};

struct RankRecord {
  int rank = 0;
  int zero1_rank = 0;      // which zero1 shard of every handle it holds
  std::string file;        // empty: a replica that writes nothing
  std::uint64_t bytes = 0; // the file's size
  std::map<std::string, TensorRecord> tensors;
};

struct ParamRecord {
  std::string fqn;
  Shape shape;
  std::int64_t offset = 0;  // in the flat parameter
};

struct HandleRecord {
  std::string name;
  std::int64_t numel_padded = 0;
  int zero1_size = 1;
  std::vector<ParamRecord> params;
  std::int64_t shard_numel() const { return numel_padded / zero1_size; }
};

struct TrainingState {
  std::int64_t next_step = 0;       // the data position and LR schedule position
  std::int64_t optimizer_step = 0;  // AdamW steps taken (bias correction)
  std::int64_t skipped_total = 0;
  std::int64_t consecutive_skips = 0;
  std::optional<optim::DynamicLossScaler::State> loss_scaler;  // f16 only
};

struct CheckpointIndex {
  int version = kCheckpointFormatVersion;
  std::int64_t step = 0;  // the step directory's number (== state.next_step)
  int world_size = 1;
  std::string strategy;
  int zero3_size = 1;
  std::string dtype;  // compute dtype of the run
  std::vector<HandleRecord> handles;
  std::vector<RankRecord> ranks;  // one per world rank, by rank
  TrainingState state;
  std::string run_json = "{}";  // the run's flags and model config, opaque

  std::uint64_t total_bytes() const;
};

std::string index_to_json(const CheckpointIndex& index);
// One rank's record alone (ranks exchange them while saving).
std::string rank_record_to_json(const RankRecord& record);
RankRecord rank_record_from_json(const std::string& text, const std::string& source);
// Parses and checks the index (types, version, ranks 0..W-1, handles with
// shards of whole elements, a writer for every zero1 shard of every handle,
// every writer's file listing each handle's three tensors at the shard size).
// CheckpointError naming `source` and the field.
CheckpointIndex index_from_json(const std::string& text, const std::string& source);

}  // namespace zrt::optim
