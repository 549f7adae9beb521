// Reading a checkpoint step: its index, its rank files verified tensor by
// tensor against the index's checksums, and any range of any parameter's
// saved state, whichever rank files hold it (Note [Checkpoint format]).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "zrt/optim/checkpoint/checkpoint_index.h"
#include "zrt/optim/flat_param/flat_param_layout.h"
#include "zrt/runtime/io/safetensors.h"

namespace zrt::optim {

class CheckpointReader {
 public:
  // Resolves `path` (a step directory, or a root whose `latest` names one),
  // checks index.json against its checksums (index.json.xxh64 and `latest`'s),
  // parses and validates it (validate_index; its step against the step
  // directory's name) and checks that every listed rank file exists with its
  // recorded size. CheckpointError naming the file otherwise.
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();

  const std::string& step_dir() const { return step_dir_; }
  const CheckpointIndex& index() const { return index_; }
  // The record of parameter `fqn` and its handle's index; nullptr if absent.
  const ParamRecord* find_param(const std::string& fqn, std::size_t* handle = nullptr) const;

  // Handle h's zero1 shard z of `kind` (f32 cpu), verified on first read.
  const Tensor& shard(std::size_t h, int z, ShardKind kind);
  struct ShardKey {
    std::size_t handle;
    int zero1_rank;
    ShardKind kind;
  };
  // Drops a shard read by shard() (a later shard() reads it again): what
  // lets a reader go through a checkpoint holding one shard at a time.
  void forget_shard(std::size_t h, int z, ShardKind kind) { shards_.erase({h, z, kind}); }
  // Reads and verifies these shards on a few threads at once (a file's
  // tensors are independent), so that shard() then finds them.
  void read_shards(const std::vector<ShardKey>& keys);
  // Elements [begin, end) of parameter `fqn`'s flattened `kind` into dst.
  void read_param_range(const std::string& fqn, ShardKind kind, std::int64_t begin,
                        std::int64_t end, float* dst);
  // The whole parameter, original shape, f32 cpu.
  Tensor read_param(const std::string& fqn, ShardKind kind);
  // Reads every tensor of every rank file and checks dtype, shape and
  // checksum; returns the bytes read.
  std::uint64_t verify_all();
  // The rank file holding handle h's zero1 shard z.
  const RankRecord& holder(std::size_t h, int z) const;

 private:
  Tensor read_verified(const RankRecord& rank, const std::string& name);
  SafetensorsReader& file(const RankRecord& rank);

  std::string step_dir_;
  CheckpointIndex index_;
  std::map<std::string, std::pair<std::size_t, std::size_t>> params_;  // fqn -> (handle, param)
  // Rank files open at once, at most: far below the usual 1024 descriptors
  // a process may hold, whatever the checkpoint's world size.
  static constexpr std::size_t kMaxOpenFiles = 32;
  std::map<int, std::unique_ptr<SafetensorsReader>> files_;  // by rank
  std::map<std::tuple<std::size_t, int, ShardKind>, Tensor> shards_;
};

// Fills `out` (f32 cpu, one zero1 shard of a target layout) from the
// checkpoint: parameter `fqns[i]` where infos[i] places it, zeros elsewhere.
void fill_shard(CheckpointReader& reader, const std::vector<std::string>& fqns,
                const std::vector<optim::ShardParamInfo>& infos, ShardKind kind, Tensor& out);
// Zeros every element of `out` (f32 cpu, one zero1 shard) that no parameter
// of `infos` covers: the padding, as fill_shard leaves it.
void zero_outside_params(const std::vector<optim::ShardParamInfo>& infos, Tensor& out);

}  // namespace zrt::optim
