#include "zrt/optim/checkpoint/offline_tools.h"

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/checkpoint_writer.h"
#include "zrt/runtime/io/path_overlap.h"
#include "zrt/runtime/io/safetensors_writer.h"

namespace zrt::optim {

namespace fs = std::filesystem;

std::map<std::string, Tensor> consolidated_params(const std::string& checkpoint) {
  CheckpointReader reader(checkpoint);
  std::map<std::string, Tensor> out;
  for (const HandleRecord& h : reader.index().handles)
    for (const ParamRecord& p : h.params) out[p.fqn] = reader.read_param(p.fqn, ShardKind::param);
  return out;
}

Exported export_params(const std::string& checkpoint, const std::string& out,
                       const std::function<void()>& between_shards) {
  CheckpointReader reader(checkpoint);
  const CheckpointIndex& index = reader.index();
  std::map<std::string, SafetensorsSpec> specs;
  for (const HandleRecord& h : index.handles)
    for (const ParamRecord& p : h.params) specs[p.fqn] = {DType::f32, p.shape};
  SafetensorsWriter file(out, specs);
  // Rank file by rank file: the reader keeps a few open, so handle by handle
  // would open every file once per handle in a world of many ranks.
  std::vector<std::tuple<int, std::size_t, int>> shards;  // (rank file, handle, zero1 shard)
  for (std::size_t k = 0; k < index.handles.size(); ++k)
    for (int z = 0; z < index.handles[k].zero1_size; ++z)
      shards.emplace_back(reader.holder(k, z).rank, k, z);
  std::sort(shards.begin(), shards.end());
  for (const auto& [rank, k, z] : shards) {
    if (between_shards) between_shards();
    const HandleRecord& h = index.handles[k];
    const std::int64_t n = h.shard_numel();
    const float* shard = reader.shard(k, z, ShardKind::param).data<float>();
    // Shard z holds flat elements [z * n, (z + 1) * n).
    for (const ParamRecord& p : h.params) {
      const std::int64_t a = std::max(z * n, p.offset);
      const std::int64_t b = std::min((z + 1) * n, p.offset + shape_numel(p.shape));
      if (a < b) file.write_elements(p.fqn, a - p.offset, b - a, shard + (a - z * n));
    }
    reader.forget_shard(k, z, ShardKind::param);
  }
  file.commit();
  return {specs.size(), reader.step_dir()};
}

std::string reshard_checkpoint(const std::string& checkpoint, const std::string& out_root,
                               int world, optim::ShardingStrategy strategy, int zero3_size,
                               const std::function<void()>& between_shards) {
  ZRT_CHECK_ARG(world >= 1, "reshard: the world size must be >= 1 (got ", world, ")");
  const int z = zero3_size > 0 ? zero3_size : world;
  ZRT_CHECK_ARG(z <= world && world % z == 0, "reshard: zero3 size ", z,
                " does not divide the world size ", world);
  CheckpointReader reader(checkpoint);
  // By whole components, through links: L is no parent of L7/step-000007.
  ZRT_CHECK_ARG(
      !path_is_within(reader.step_dir(), out_root) && !path_is_within(out_root, reader.step_dir()),
      "reshard: the output ", out_root, " and the checkpoint ", reader.step_dir(),
      " must not contain each other");
  const CheckpointIndex& old = reader.index();
  CheckpointIndex index = old;
  const StrategyGroups groups = strategy_groups(strategy, world, z);
  index.version = kCheckpointFormatVersion;  // written anew, whatever format it was read from
  index.world_size = world;
  index.strategy = optim::strategy_name(strategy);
  index.zero3_size = groups.zero3_size;
  const DType dtype = *parse_dtype(old.dtype);  // validate_index knows it
  const int zero1_size = groups.zero1_size;
  std::vector<optim::FlatParamLayout> layouts;
  for (HandleRecord& h : index.handles) {
    std::vector<optim::ParamSpec> specs;
    for (const ParamRecord& p : h.params) specs.push_back({p.fqn, p.shape, p.pad_rows});
    // A zero1 group of one quantizes nothing: its runs lay out without the grid.
    if (zero1_size == 1) h.quant_block = 0;
    layouts.emplace_back(specs, dtype, zero1_size, h.quant_block);
    h.numel_padded = layouts.back().numel_padded();
    h.zero1_size = zero1_size;
    for (std::size_t i = 0; i < h.params.size(); ++i)
      h.params[i].offset = layouts.back().param_offset(i);
  }
  begin_step(out_root, index.step);
  // A write that fails (disk full, a file-size limit) leaves no partial step.
  struct RemoveUnlessCommitted {
    std::string dir;
    bool committed = false;
    ~RemoveUnlessCommitted() {
      std::error_code ignored;
      if (!committed) fs::remove_all(dir, ignored);
    }
  } partial{step_tmp_dir(out_root, index.step)};
  index.ranks.clear();
  for (int r = 0; r < world; ++r) {
    const RankPlace at = strategy_rank_place(strategy, z, r);
    RankRecord rec;
    rec.rank = r;
    rec.zero1_rank = at.zero1_rank;
    if (at.writes) {
      std::map<std::string, Tensor> tensors;
      for (std::size_t k = 0; k < index.handles.size(); ++k) {
        const auto infos = layouts[k].shard_infos(at.zero1_rank, zero1_size);
        std::vector<std::string> fqns;
        for (const ParamRecord& p : index.handles[k].params) fqns.push_back(p.fqn);
        for (ShardKind kind : kAllShardKinds) {
          if (between_shards) between_shards();
          Tensor t = Tensor::empty({layouts[k].shard_numel(zero1_size)}, DType::f32);
          fill_shard(reader, fqns, infos, kind, t);
          tensors[shard_tensor_name(index.handles[k].name, kind)] = t;
        }
      }
      rec.file = rank_file_name(r);
      write_rank_file((fs::path(step_tmp_dir(out_root, index.step)) / rec.file).string(), tensors,
                      rec);
    }
    index.ranks.push_back(std::move(rec));
  }
  std::string committed = commit_step(out_root, index, 0);
  partial.committed = true;
  return committed;
}

}  // namespace zrt::optim
