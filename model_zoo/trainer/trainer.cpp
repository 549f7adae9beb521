#include "zrt/model_zoo/trainer/trainer.h"

#include <chrono>
#include <iostream>
#include <utility>

#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/optim/optim_error.h"

namespace zrt::model_zoo {

Trainer::Trainer(CommPtr world, TrainerConfig config, Dataset data,
                 const std::map<std::string, Tensor>* initial)
    : world_(std::move(world)), config_(std::move(config)), data_(std::move(data)) {
  ZRT_CHECK_ARG(world_ != nullptr, "Trainer needs a world communicator");
  config_.model.dtype = config_.engine.zero.dtype;
  config_.model.device = config_.engine.zero.device;
  validate_model_config(config_.model);
  check_dataset_fits_model(data_, config_.model);
  geometry_ = {config_.batch_size, config_.seq_len, world_->size(), config_.micro_batches};
  check_batch_geometry(data_, geometry_);
  ZRT_CHECK_ARG(config_.check_consistency_every >= 0, "consistency check every ",
                config_.check_consistency_every, " steps: must be 0 (never) or positive");
  config_.schedule.total_steps = config_.steps;
  schedule_ = std::make_unique<optim::WarmupCosineLr>(config_.schedule);
  auto model = make_model(config_.model);
  // Without given values each rank reads (Note [Streamed loading]) or draws
  // (Note [Sharded initialisation]) only its shards.
  if (initial)
    engine_ = std::make_unique<TrainingEngine>(std::move(model), world_, config_.engine, *initial);
  else if (!config_.init_from.empty()) {
    const ParamFileSource file(make_model(config_.model)->units(), config_.init_from,
                               config_.engine.zero.host_allocator);
    if (world_->rank() == 0 && !file.skipped_keys().empty())  // once, not once a rank
      std::cerr << "zrt: " << skipped_buffers_note(file.path(), file.skipped_keys()) << "\n";
    engine_ = std::make_unique<TrainingEngine>(std::move(model), world_, config_.engine, file);
  } else
    engine_ = std::make_unique<TrainingEngine>(std::move(model), world_, config_.engine);
  if (config_.checkpoint_async)
    saver_ = std::make_unique<optim::BackgroundCheckpointSaver>(engine_->module(),
                                                                config_.host_comm.get());
}

StepReport Trainer::step() {
  const auto t0 = std::chrono::steady_clock::now();
  const TrafficCounts traffic0 = world_->traffic()->read();
  std::vector<Batch> batches;
  for (int m = 0; m < config_.micro_batches; ++m)
    // On the host: the engine copies them into its caching allocator's memory.
    batches.push_back(make_micro_batch(data_, step_, geometry_, world_->rank(), m));
  engine_->module().allocator()->reset_peak_stats();  // the report's peaks are this step's
  StepReport r;
  r.step = step_;
  r.lr = schedule_->lr(step_);
  const std::int64_t every = config_.check_consistency_every;
  const bool check = every > 0 && (step_ + 1) % every == 0;
  // The report of the step as it ended (the run stops on a skip limit).
  auto finish = [&] {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.memory = engine_->memory_stats();
    r.traffic = world_->traffic()->read() - traffic0;
    ++step_;
  };
  try {
    r.stats = engine_->step(batches, r.lr,
                            !check                          ? ConsistencyCheck::off
                            : config_.consistency_warn_only ? ConsistencyCheck::warn
                                                            : ConsistencyCheck::stop);
  } catch (const optim::TooManySkippedStepsWith<StepStats>& e) {
    r.stats = e.found;
    finish();
    throw optim::TooManySkippedStepsWith<StepReport>(e, std::move(r));
  }
  if (r.stats.update_withheld) {  // next_step() stays: the state is the one before this step
    std::string all;
    for (const std::string& f : r.stats.inconsistencies) all += "; " + f;
    ZRT_THROW(ConsistencyError, "step ", step_,
              ": ranks that must hold equal data do not (the step's update was "
              "not applied)",
              all);
  }
  finish();
  return r;
}

std::string Trainer::save_checkpoint(const optim::CheckpointSaveOptions& options) {
  if (saver_) return saver_->save(step_, options);
  return optim::save_checkpoint(engine_->module(), step_, options);
}

std::string Trainer::wait_for_checkpoint() { return saver_ ? saver_->wait() : std::string(); }

std::string Trainer::resume(const std::string& path) {
  wait_for_checkpoint();  // the step being written may be the one to load
  std::string run;
  const optim::TrainingState state = optim::load_checkpoint(engine_->module(), path, &run);
  step_ = state.next_step;
  return run;
}

}  // namespace zrt::model_zoo
