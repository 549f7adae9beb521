#include "zrt/optim/checkpoint/module_checkpoint.h"

#include <filesystem>
#include <set>

#include "zrt/optim/checkpoint/checkpoint_agreement.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/checkpoint_snapshot.h"

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

}  // namespace

std::string save_checkpoint(ZeroModule& module, std::int64_t next_step, const CheckpointSaveOptions& options) {
  return write_snapshot(*module.world(), take_snapshot(module, next_step, options, nullptr));
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
