#include "zrt/optim/checkpoint/module_checkpoint.h"

#include <filesystem>
#include <optional>
#include <set>

#include "zrt/optim/checkpoint/checkpoint_agreement.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/checkpoint_snapshot.h"
#include "zrt/optim/checkpoint/checksum.h"

namespace zrt::optim {

namespace {

namespace fs = std::filesystem;

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

// The saved handle holding h's parameters when its flat layout and zero1
// group size are h's (the same model saved under the same sharding): its
// shard z is then this rank's shard as it is.
std::optional<std::size_t> saved_with_same_layout(const CheckpointReader& reader,
                                                  const FlatParamHandle& h) {
  std::size_t index = 0;
  if (h.num_params() == 0 || !reader.find_param(h.fqn(0), &index)) return std::nullopt;
  const HandleRecord& saved = reader.index().handles[index];
  if (saved.numel_padded != h.layout().numel_padded() ||
      saved.zero1_size != h.layout().zero1_size() || saved.params.size() != h.num_params())
    return std::nullopt;
  for (std::size_t i = 0; i < h.num_params(); ++i) {
    const ParamRecord& p = saved.params[i];
    if (p.fqn != h.fqn(i) || p.shape != h.layout().params()[i].shape ||
        p.offset != h.layout().param_offset(i) || p.pad_rows != h.layout().params()[i].pad_rows)
      return std::nullopt;
  }
  return index;
}

}  // namespace

std::string save_checkpoint(ZeroModule& module, std::int64_t next_step,
                            const CheckpointSaveOptions& options) {
  // Names the call in a mismatch with another rank's (Note [Collective contract]).
  FlightRecorder::Caller caller(*module.world()->flight_recorder(), "save_checkpoint()");
  module.wait_for_background_save(
      "save_checkpoint");  // Note [Checkpoints wait for the save in flight]
  return write_snapshot(*module.world(), take_snapshot(module, next_step, options, nullptr));
}

TrainingState load_checkpoint(ZeroModule& module, const std::string& path, std::string* run_json) {
  Communicator& world = *module.world();
  FlightRecorder::Caller caller(*world.flight_recorder(), "load_checkpoint()");
  // Note [No step inside a step].
  ZRT_CHECK_CALL(!module.stepping(),
                 "load_checkpoint: called while a step() runs (from its before_update, or the "
                 "optimizer's callbacks); the step would apply its update on top of the loaded "
                 "state: load between steps");
  const auto& handles = module.handles();
  for (const auto& h : handles)
    ZRT_CHECK_CALL(h->state() == HandleState::idle, "load_checkpoint: unit '", h->name(),
                   "' has a scope open; load between steps, with every scope closed");
  module.wait_for_background_save(
      "load_checkpoint");  // Note [Checkpoints wait for the save in flight]
  // staged[k][kind]: this rank's new zero1 shard state, host fp32.
  std::vector<std::vector<Tensor>> staged(handles.size());
  TrainingState state;
  std::string run;
  std::string identity;  // the index's digest, then its step directory
  std::string error = error_of([&] {
    CheckpointReader reader(path);
    const std::string index = index_to_json(reader.index());
    identity = checksum_hex(xxh64(index.data(), index.size())) + reader.step_dir();
    check_same_model(module, reader);
    // Shards saved under this very layout are read whole, on a few threads.
    std::vector<std::optional<std::size_t>> same(handles.size());
    std::vector<CheckpointReader::ShardKey> whole;
    for (std::size_t k = 0; k < handles.size(); ++k) {
      same[k] = saved_with_same_layout(reader, *handles[k]);
      if (same[k])
        for (ShardKind kind : kAllShardKinds)
          whole.push_back({*same[k], handles[k]->groups().zero1->rank(), kind});
    }
    reader.read_shards(whole);
    for (std::size_t k = 0; k < handles.size(); ++k) {
      const FlatParamHandle& h = *handles[k];
      std::vector<std::string> fqns;
      for (std::size_t i = 0; i < h.num_params(); ++i) fqns.push_back(h.fqn(i));
      for (ShardKind kind : kAllShardKinds) {
        if (same[k]) {
          // The saved shard is this rank's shard as it stands: no reshard, no copy.
          Tensor t = reader.shard(*same[k], h.groups().zero1->rank(), kind);
          zero_outside_params(h.zero1_shard_infos(), t);
          staged[k].push_back(t);
          continue;
        }
        Tensor t = Tensor::empty({h.zero1_shard().numel()}, DType::f32, Device::cpu(),
                                 huge_page_host_allocator());
        fill_shard(reader, fqns, h.zero1_shard_infos(), kind, t);
        staged[k].push_back(t);
      }
    }
    state = reader.index().state;
    run = reader.index().run_json;
    // The scaler's state as this run's options take it (Note [Loss scale
    // updates]): checked before anything changes.
    if (module.loss_scaler() && state.loss_scaler) {
      try {
        DynamicLossScaler(module.loss_scaler()->options()).load_state(*state.loss_scaler);
      } catch (const InvalidArgument& e) {
        ZRT_THROW(CheckpointError, reader.step_dir(),
                  ": index field state.loss_scaler does not fit this run: ", e.what());
      }
    }
  });
  agree(world, error, "loading checkpoint " + path);
  // One checkpoint on every rank, or its byte-identical copies: shards of
  // two would make one model of both, without a word.
  const std::vector<std::string> identities = exchange_texts(world, identity);
  for (std::size_t r = 1; r < identities.size(); ++r)
    ZRT_CHECK_AS(CheckpointError, identities[r].substr(0, 16) == identities[0].substr(0, 16),
                 "loading checkpoint ", path, ": the ranks read different checkpoints, ",
                 identities[0].substr(16), " on rank 0 and ", identities[r].substr(16), " on rank ",
                 r,
                 identities[r].substr(16) == identities[0].substr(16)
                     ? " (one path, other contents: a directory local to each machine?)"
                     : "",
                 "; every rank must load the same one (a copy of it will do)");

  ZeroAdamW& opt = module.optimizer();
  // Moments on disk are written here, which can fail on one rank: every rank learns of it.
  // Queued work may still read the masters (an upload of a master in host
  // memory, a prefetched gather): it runs before they are overwritten.
  module.synchronize();
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
  // Gradients accumulated before the load belong to the weights it replaced.
  module.discard_gradients();
  opt.load_counters(state.optimizer_step, state.skipped_total, state.consecutive_skips);
  if (module.loss_scaler() && state.loss_scaler)
    module.loss_scaler()->load_state(*state.loss_scaler);
  if (run_json) *run_json = run;
  return state;
}

}  // namespace zrt::optim
