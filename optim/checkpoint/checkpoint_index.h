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
// optimizer step and skip counters, loss scaler, the dtype the run kept
// AdamW's moments in: their shards are fp32 either way) and the run's flags as an
// opaque JSON object. Ranks holding a replica of a shard another rank writes
// (hybrid replicas, no-shard) write no file. Since every parameter's place in
// the old flat parameters is known, any new layout can be filled from it:
// that is how a checkpoint loads at another world size or strategy.
//
// The index is what says where every byte of the shards belongs, so it is
// checked as strictly as the shards (a wrong offset loads wrong weights from
// intact files):
//   - its own checksum, xxHash64 of the exact bytes of index.json, lives
//     outside it twice: in step-000120/index.json.xxh64 ("<hex>  index.json",
//     as `xxhsum` writes it; written durably right after index.json, inside
//     step-000120.tmp/, so a step appears with both or neither) and as the
//     second line of `latest`, "index-xxh64 <hex>" (replaced by one rename
//     with the step name on its first line, so the two always agree). An edit
//     of index.json that does not rewrite the checksum file fails it; one that
//     does still fails `latest` when the step is opened through its root. The
//     reader checks every checksum it finds (index_checksum.h);
//   - format 2 (this one) always has index.json.xxh64: a format-2 index
//     without it is refused, and so is a format-1 index (written before the
//     checksums, read without one) that has one, since its version was
//     edited. `latest` without a second line (an older zrt, a hand) is read;
//   - every relation between its numbers is validated when it is parsed
//     (validate_index, index_validation.h): the layout against the flat
//     parameter layout rule, the ranks against the strategy's placement, the
//     tensors against the layout, the counters against each other, and the
//     step against the step directory's name.
// A checkpoint failing any of these is a CheckpointError naming the file and
// the field, before anything is read from the shards.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/optim/loss_scaler.h"
#include "zrt/runtime/dtype.h"
#include "zrt/runtime/tensor.h"

namespace zrt::optim {

// 2: index.json.xxh64 and the index checksum in `latest`. 1 is still read.
inline constexpr int kCheckpointFormatVersion = 2;
inline constexpr int kOldestCheckpointFormatVersion = 1;
inline constexpr int kFirstIndexChecksumVersion = 2;

enum class ShardKind { param, exp_avg, exp_avg_sq };
inline constexpr ShardKind kAllShardKinds[] = {ShardKind::param, ShardKind::exp_avg,
                                               ShardKind::exp_avg_sq};
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
  int zero1_rank = 0;       // which zero1 shard of every handle it holds
  std::string file;         // empty: a replica that writes nothing
  std::uint64_t bytes = 0;  // the file's size
  std::map<std::string, TensorRecord> tensors;
};

struct ParamRecord {
  std::string fqn;
  Shape shape;
  std::int64_t offset = 0;    // in the flat parameter
  std::int64_t pad_rows = 0;  // "pad_rows", only when > 0 (Note [Padded rows of a parameter])
};

struct HandleRecord {
  std::string name;
  std::int64_t numel_padded = 0;
  int zero1_size = 1;
  // "quant_block", only when > 0 (Note [Quantization blocks within one parameter]).
  std::int64_t quant_block = 0;
  std::vector<ParamRecord> params;
  std::int64_t shard_numel() const { return numel_padded / zero1_size; }
};

struct TrainingState {
  std::int64_t next_step = 0;       // the data position and LR schedule position
  std::int64_t optimizer_step = 0;  // AdamW steps taken (bias correction)
  std::int64_t skipped_total = 0;
  std::int64_t consecutive_skips = 0;
  std::optional<optim::DynamicLossScaler::State> loss_scaler;  // f16 only
  // The run's AdamW state dtype, "optimizer_state_dtype" (absent: f32). The
  // moments are saved f32 either way (bf16 widens exactly), so this records
  // the run, and a checkpoint resumes into either (Note [bf16 AdamW moments]).
  DType optimizer_state_dtype = DType::f32;
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

// Where `strategy` puts the ranks of a world of `world_size` (zero3 groups
// of `zero3_size` for hybrid and layer-zero, dividing the world; the others
// ignore it), as plan_strategy groups them and an index records them.
struct StrategyGroups {
  int zero1_size;  // of every handle
  int zero3_size;  // as recorded: no-shard 1, full and grad-op the world
};
StrategyGroups strategy_groups(ShardingStrategy strategy, int world_size, int zero3_size);
struct RankPlace {
  int zero1_rank;  // the zero1 shard it holds
  bool writes;     // false: a replica of a shard an earlier rank writes
};
RankPlace strategy_rank_place(ShardingStrategy strategy, int zero3_size, int rank);

// What makes checkpoints steps of one run: the model (its parameters' names
// and shapes) and the seed the run's JSON records. A copy of the run, or
// the same job requeued, has the same; another run rarely does.
std::string run_identity(const CheckpointIndex& index);

std::string index_to_json(const CheckpointIndex& index);
// One rank's record alone (ranks exchange them while saving).
std::string rank_record_to_json(const RankRecord& record);
RankRecord rank_record_from_json(const std::string& text, const std::string& source);
// Parses the index (every field present with its type and range) and
// validates it as a whole (validate_index). CheckpointError naming `source`
// and the field.
CheckpointIndex index_from_json(const std::string& text, const std::string& source);

}  // namespace zrt::optim
