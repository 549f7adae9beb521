#include "zrt/optim/checkpoint/module_checkpoint.h"

#include <filesystem>
#include <set>

#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/checkpoint_writer.h"
#include "zrt/optim/flat_param/sharding_strategy.h"

namespace zrt::optim {

namespace {

namespace fs = std::filesystem;

// Each rank's payload of one phase: "" (ok) or an error text, plus data.
std::vector<std::string> exchange_texts(Communicator& world, const std::string& mine) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(mine.data()), mine.size());
  std::vector<std::string> all;
  for (const auto& b : world.all_gather_bytes(bytes))
    all.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
  return all;
}

// Note [Ranks agree on checkpoints]: throws the first failing rank's error on every rank.
void agree(Communicator& world, const std::string& error, const std::string& what) {
  const std::vector<std::string> errors = exchange_texts(world, error);
  for (std::size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) ZRT_THROW(CheckpointError, what, " failed on rank ", r, ": ", errors[r]);
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what()[0] ? e.what() : "unknown error";
  }
  return {};
}

// Whether this rank writes its shards: replicas of a shard leave it to replica 0.
bool writes_shards(const FlatParamHandle& h) {
  const CommPtr& replica = h.groups().replica;
  return !replica || replica->rank() == 0;
}

std::vector<HandleRecord> handle_records(const ZeroModule& module) {
  std::vector<HandleRecord> out;
  for (const auto& h : module.handles()) {
    HandleRecord r;
    r.name = h->name();
    r.numel_padded = h->layout().numel_padded();
    r.zero1_size = h->layout().zero1_size();
    for (std::size_t i = 0; i < h->num_params(); ++i)
      r.params.push_back({h->fqn(i), h->layout().params()[i].shape, h->layout().param_offset(i)});
    out.push_back(std::move(r));
  }
  return out;
}

// The checkpoint must hold exactly this module's parameters with their shapes.
void check_same_model(const ZeroModule& module, const CheckpointReader& reader) {
  std::set<std::string> ours;
  for (const auto& h : module.handles())
    for (std::size_t i = 0; i < h->num_params(); ++i) {
      const ParamSpec& p = h->layout().params()[i];
      ours.insert(p.fqn);
      const ParamRecord* saved = reader.find_param(p.fqn);
      if (!saved)
        ZRT_THROW(CheckpointError, reader.step_dir(), ": the checkpoint has no parameter ", p.fqn,
                  " (saved from another model?)");
      if (saved->shape != p.shape)
        ZRT_THROW(CheckpointError, reader.step_dir(), ": parameter ", p.fqn, " was saved as ",
                  shape_str(saved->shape), " but the model has ", shape_str(p.shape));
    }
  for (const HandleRecord& h : reader.index().handles)
    for (const ParamRecord& p : h.params)
      if (!ours.count(p.fqn))
        ZRT_THROW(CheckpointError, reader.step_dir(), ": the checkpoint's parameter ", p.fqn,
                  " is not in the model (saved from another model?)");
}

}  // namespace

std::string save_checkpoint(ZeroModule& module, std::int64_t next_step, const CheckpointSaveOptions& options) {
  Communicator& world = *module.world();
  const int rank = world.rank();
  ZRT_CHECK_ARG(!options.root.empty(), "save_checkpoint: no checkpoint directory given");
  ZRT_CHECK_ARG(next_step >= 0, "save_checkpoint: step must be >= 0 (got ", next_step, ")");
  const std::string what = "saving checkpoint " + step_dir(options.root, next_step);
  const std::string tmp = step_tmp_dir(options.root, next_step);
  module.synchronize();  // the shards are written on the module's streams (the last AdamW step)

  agree(world, rank == 0 ? error_of([&] { begin_step(options.root, next_step); }) : "", what);

  const FlatParamHandle& first = *module.handles().front();
  RankRecord record;
  record.rank = rank;
  record.zero1_rank = first.groups().zero1->rank();
  std::string error = error_of([&] {
    if (options.before_write) options.before_write(rank);
    if (!writes_shards(first)) return;
    std::map<std::string, Tensor> tensors;
    const ZeroAdamW& opt = module.optimizer();
    for (std::size_t k = 0; k < module.handles().size(); ++k) {
      const std::string& name = module.handles()[k]->name();
      tensors[shard_tensor_name(name, ShardKind::param)] = module.handles()[k]->zero1_shard();
      tensors[shard_tensor_name(name, ShardKind::exp_avg)] = opt.exp_avg_shard(k);
      tensors[shard_tensor_name(name, ShardKind::exp_avg_sq)] = opt.exp_avg_sq_shard(k);
    }
    record.file = rank_file_name(rank);
    write_rank_file((fs::path(tmp) / record.file).string(), tensors, record);
  });
  // Records travel after a marker byte that errors never start with.
  const std::vector<std::string> replies = exchange_texts(world, error.empty() ? "\x01" + rank_record_to_json(record) : error);
  for (std::size_t r = 0; r < replies.size(); ++r)
    if (replies[r].empty() || replies[r][0] != '\x01') {
      if (rank == 0) {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);  // a failed save leaves nothing behind
      }
      ZRT_THROW(CheckpointError, what, " failed on rank ", r, ": ", replies[r]);
    }

  std::string step_path;
  error = rank != 0 ? "" : error_of([&] {
    CheckpointIndex index;
    index.step = next_step;
    index.world_size = world.size();
    index.strategy = strategy_name(module.options().strategy);
    index.zero3_size = first.groups().zero3->size();
    index.dtype = dtype_name(module.options().dtype);
    index.handles = handle_records(module);
    for (std::size_t r = 0; r < replies.size(); ++r)
      index.ranks.push_back(rank_record_from_json(replies[r].substr(1), "rank " + std::to_string(r)));
    index.state.next_step = next_step;
    index.state.optimizer_step = module.optimizer().step_count();
    index.state.skipped_total = module.optimizer().skipped_total();
    index.state.consecutive_skips = module.optimizer().consecutive_skips();
    if (module.loss_scaler()) index.state.loss_scaler = module.loss_scaler()->state();
    index.run_json = options.run_json;
    commit_step(options.root, index, options.keep_last);
  });
  if (rank == 0 && !error.empty()) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
  }
  agree(world, error, what);
  return step_dir(options.root, next_step);
}

TrainingState load_checkpoint(ZeroModule& module, const std::string& path, std::string* run_json) {
  Communicator& world = *module.world();
  const auto& handles = module.handles();
  // staged[k][kind]: this rank's new zero1 shard state, host fp32.
  std::vector<std::vector<Tensor>> staged(handles.size());
  TrainingState state;
  std::string run;
  std::string error = error_of([&] {
    CheckpointReader reader(path);
    check_same_model(module, reader);
    for (std::size_t k = 0; k < handles.size(); ++k) {
      const FlatParamHandle& h = *handles[k];
      std::vector<std::string> fqns;
      for (std::size_t i = 0; i < h.num_params(); ++i) fqns.push_back(h.fqn(i));
      for (ShardKind kind : kAllShardKinds) {
        Tensor t = Tensor::empty({h.zero1_shard().numel()}, DType::f32);
        fill_shard(reader, fqns, h.zero1_shard_infos(), kind, t);
        staged[k].push_back(t);
      }
    }
    state = reader.index().state;
    run = reader.index().run_json;
    // The scaler's counters are bounded by this run's options, not the index's: checked before anything changes.
    if (module.loss_scaler() && state.loss_scaler) {
      try {
        DynamicLossScaler(module.loss_scaler()->options()).load_state(*state.loss_scaler);
      } catch (const InvalidArgument& e) {
        ZRT_THROW(CheckpointError, reader.step_dir(), ": index field state.loss_scaler does not fit this run: ",
                  e.what());
      }
    }
  });
  agree(world, error, "loading checkpoint " + path);

  ZeroAdamW& opt = module.optimizer();
  // Moments on disk are written here, which can fail on one rank: every rank learns of it.
  error = error_of([&] {
    for (std::size_t k = 0; k < handles.size(); ++k) {
      FlatParamHandle& h = *handles[k];
      const Stream stream = h.options().stream;
      Tensor(h.zero1_shard()).copy_(staged[k][0], stream);
      opt.load_moments(k, staged[k][1], staged[k][2], stream);
      h.mark_params_updated();
    }
  });
  agree(world, error, "loading checkpoint " + path + " (writing the optimizer state)");
  module.synchronize();  // the copies read the staged buffers, which go when this returns
  opt.load_counters(state.optimizer_step, state.skipped_total, state.consecutive_skips);
  if (module.loss_scaler() && state.loss_scaler) module.loss_scaler()->load_state(*state.loss_scaler);
  if (run_json) *run_json = run;
  return state;
}

}  // namespace zrt::optim
