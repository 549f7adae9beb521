#include "tools/train/preflight.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "tools/train/train_setup.h"
#include "zrt/model_zoo/models/model_config.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/io/output_path.h"

namespace zrt::train {

namespace {

// The ranks of this process and of the world, and the ranks one copy of the
// optimizer state is sharded over (the world, a hybrid zero3 group, or one
// rank for no-shard).
struct StateSharding {
  std::uint64_t world = 1, here = 1, state_ranks = 1;
};
StateSharding state_sharding(const TrainOptions& o) {
  StateSharding s;
  s.world = o.ranks > 0 ? static_cast<std::uint64_t>(o.ranks)
                        : static_cast<std::uint64_t>(detect_launch().size);
  s.here = o.ranks > 0 ? s.world : 1;
  s.state_ranks = s.world;
  const std::uint64_t zero3 = static_cast<std::uint64_t>(o.trainer.engine.zero.zero3_size);
  if (o.trainer.engine.zero.strategy == optim::ShardingStrategy::no_shard) s.state_ranks = 1;
  if (o.trainer.engine.zero.strategy == optim::ShardingStrategy::hybrid_shard && zero3 > 0)
    s.state_ranks = zero3;
  return s;
}

}  // namespace

ModelSize model_size(const TrainOptions& o) {
  ModelSize size;
  const auto model = model_zoo::make_model(trainer_config(o, 0).model);
  // Sums that saturate: an absurd model (dimensions near 2^31) has more
  // elements than 64 bits count, and must read as too large, not wrap.
  auto add = [](std::uint64_t a, std::uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
  };
  for (const model_zoo::UnitDef& u : model->units()) {
    std::uint64_t n = 0;
    for (const model_zoo::ParamDef& p : u.params) {
      n = add(n, static_cast<std::uint64_t>(shape_numel(p.shape)));
      size.header += p.fqn().size() + 64;
    }
    size.params = add(size.params, n);
    size.largest_unit = std::max(size.largest_unit, n);
  }
  return size;
}

// The sizes of --save, of one checkpoint and of disk-offloaded moments,
// from the model's parameters: --save holds each as fp32 (4 bytes), a
// checkpoint also AdamW's m and v (12 bytes); safetensors headers take
// about the name plus 64 bytes per tensor (a checkpoint: one per rank file,
// and the index).
std::vector<PlannedOutput> planned_outputs(const TrainOptions& o, const ModelSize& size) {
  std::vector<PlannedOutput> out;
  if (!o.save.empty()) out.push_back({"--save", o.save, 4 * size.params + size.header});
  if (!o.checkpoint_dir.empty())
    out.push_back({"--checkpoint-dir", o.checkpoint_dir, 12 * size.params + 2 * size.header});
  // The moments' scratch files of this process's ranks share the disk too.
  const optim::OptimizerOffload& offload = o.trainer.engine.zero.offload_optimizer;
  if (offload.kind == optim::OptimizerOffload::Kind::disk) {
    const StateSharding s = state_sharding(o);
    const std::uint64_t shard = (size.params + s.state_ranks - 1) / s.state_ranks;
    out.push_back({"--offload-optimizer", offload.dir,
                   s.here * shard * 2 * dtype_size(o.trainer.engine.zero.adamw.state_dtype)});
  }
  return out;
}

// A model that cannot fit is refused before anything is allocated, with the
// numbers (as the disk-space check does), instead of being killed without a
// word. What is counted is a floor, never a guess that could refuse a run
// that fits: per rank, the fp32 master weights and AdamW's m and v of its
// share of the parameters (16 bytes each, sharded over the ranks that share
// the optimizer state: the world, a hybrid zero3 group, or one rank for
// no-shard; the fp32 master, its gradient shard, m and v; 12 with bf16 m and v,
// --optimizer-state-dtype bf16; 8 when m and v are on disk,
// --offload-optimizer disk:DIR), and the
// largest unit gathered in fp32 with its fp32 gradient (8 bytes per element);
// a gpt's logits of one micro-batch (B/(W·M) × T × the padded vocabulary,
// in the compute dtype), which the loss holds whole; and the data set, once
// per process (Note [One data set per process]). Other activations, buffers
// and the allocator's caching come on top.
void check_memory_floor(const TrainOptions& o, const ModelSize& size) {
  if (o.device != "cpu") return;  // device memory is the allocator's to report
  const StateSharding sharding = state_sharding(o);
  const std::uint64_t world = sharding.world, here = sharding.here;  // here: in this process
  const std::uint64_t params = size.params, largest_unit = size.largest_unit;
  const bool moments_on_disk =
      o.trainer.engine.zero.offload_optimizer.kind == optim::OptimizerOffload::Kind::disk;
  const double moment_bytes =
      static_cast<double>(dtype_size(o.trainer.engine.zero.adamw.state_dtype));
  const double per_param = 8.0 + (moments_on_disk ? 0.0 : 2.0 * moment_bytes);
  const std::uint64_t state_ranks = sharding.state_ranks;
  const model_zoo::TrainerConfig config = trainer_config(o, 0);
  const double data = static_cast<double>(data_memory_bytes(o, config));
  double logits = 0;
  std::string seq_len_advice;  // the position embedding grown to --seq-len is most of the model
  if (config.model.kind == "gpt") {
    const model_zoo::GptDims d = model_zoo::resolve_gpt_dims(config.model);
    const double positions = static_cast<double>(d.block_size) * static_cast<double>(d.n_embd);
    // Raised: not given, and the model's own block size (a preset's, a
    // loaded config's) is shorter than --seq-len.
    model_zoo::ModelConfig own = config.model;
    if (!o.as_given || o.as_given->block_size == 0) own.block_size.reset();
    const bool raised =
        !own.block_size && model_zoo::resolve_gpt_dims(own).block_size < config.seq_len;
    if (raised && positions >= static_cast<double>(params) / 2)
      seq_len_advice = "a smaller --seq-len (it raised --block-size to " +
                       std::to_string(d.block_size) + ": the position embedding's " +
                       std::to_string(d.block_size) + " x " + std::to_string(d.n_embd) +
                       " parameters are most of the model), ";
    logits = static_cast<double>(config.batch_size) /
             (static_cast<double>(world) * static_cast<double>(config.micro_batches)) *
             static_cast<double>(config.seq_len) * static_cast<double>(d.padded_vocab_size) *
             static_cast<double>(dtype_size(o.trainer.engine.zero.dtype));
  }
  const double floor =
      static_cast<double>(here) *
          (per_param * static_cast<double>(params) / static_cast<double>(state_ranks) +
           8.0 * static_cast<double>(largest_unit) + logits) +
      data;
  const AvailableMemory available = available_memory();
  const std::uint64_t avail = available.bytes();
  if (avail == 0 || floor <= static_cast<double>(avail)) return;
  ZRT_THROW(ResourceError, "the model cannot fit in memory: ",
            params == UINT64_MAX ? std::string("more than 2^64") : std::to_string(params),
            " parameters need at least ", human_bytes(floor), " in this process (", here,
            " rank(s) of ", world,
            moments_on_disk ? ": fp32 weights and gradients of each rank's shard"
                            : ": fp32 weights, gradients and AdamW state of each rank's shard",
            state_ranks == world ? ""
                                 : " of a copy sharded over " + std::to_string(state_ranks) +
                                       " rank(s) by --strategy " +
                                       optim::strategy_name(o.trainer.engine.zero.strategy),
            ", one unit gathered with its gradient",
            logits > 0 ? ", one micro-batch's logits (" + human_bytes(logits) + " a rank)"
                       : std::string(),
            data > 0 ? ", the data set's " + human_bytes(data) : std::string(),
            "; other activations come on top), but ", human_bytes(static_cast<double>(avail)),
            " is available", available.bound_by(), ". Use ",
            available.limit ? "a higher " + std::string(available.limit->raise_with()) + ", " : "",
            seq_len_advice,
            logits * static_cast<double>(here) >= floor / 2
                ? "a smaller --batch-size or more --micro-batches, "
                : "",
            state_ranks < world ? "--strategy full (the state sharded over every rank), " : "",
            "more ranks (mpirun across machines), a smaller model, ",
            moments_on_disk ? "" : "--offload-optimizer disk:DIR (AdamW's state in files), ",
            "or --device cuda");
}

void check_free_space(const std::vector<PlannedOutput>& outputs) {
  namespace fs = std::filesystem;
  struct OnOneFilesystem {
    fs::path dir;  // a directory on it
    std::uint64_t bytes = 0;
    std::vector<const PlannedOutput*> outputs;
  };
  std::map<dev_t, OnOneFilesystem> by_device;
  for (const PlannedOutput& out : outputs) {
    if (out.path.empty() || names_a_stream(out.path)) continue;
    fs::path dir =
        fs::is_directory(out.path) ? fs::path(out.path) : fs::path(out.path).parent_path();
    if (dir.empty()) dir = ".";
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) continue;  // check_outputs names a missing directory
    OnOneFilesystem& use = by_device[st.st_dev];
    use.dir = dir;
    use.bytes += out.bytes;
    use.outputs.push_back(&out);
  }
  for (const auto& [dev, use] : by_device) {
    std::error_code ec;
    const fs::space_info space = fs::space(use.dir, ec);
    if (ec || use.bytes <= space.available) continue;  // unknown space: the write itself will tell
    std::string names;
    for (const PlannedOutput* out : use.outputs)
      names +=
          detail::concat(names.empty() ? "" : " and ", out->flag, " ", out->path,
                         use.outputs.size() > 1 ? detail::concat(" (", out->bytes, " bytes)") : "");
    ZRT_THROW(ResourceError, "not enough free disk space: ", names,
              use.outputs.size() > 1 ? " together need " : " needs ", use.bytes,
              " bytes, but the filesystem of ", use.dir.string(), " has ", space.available,
              " bytes available");
  }
}

}  // namespace zrt::train
