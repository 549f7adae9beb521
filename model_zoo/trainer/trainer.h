// The training loop: a model, a dataset in the fixed data order, the engine
// and an LR schedule, one step at a time. zrt-train and the end-to-end tests
// both drive training through it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>

#include "zrt/model_zoo/data/dataset.h"
#include "zrt/model_zoo/data/micro_batch.h"
#include "zrt/model_zoo/engine/training_engine.h"
#include "zrt/model_zoo/models/model_config.h"
#include "zrt/optim/checkpoint/background_checkpoint.h"
#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/optim/lr_schedule.h"
#include "zrt/runtime/comm/comm_traffic.h"

namespace zrt::model_zoo {

struct TrainerConfig {
  ModelConfig model{};
  EngineConfig engine{};
  std::int64_t batch_size = 8;  // global sequences (gpt) or rows (mlp) per step
  std::int64_t seq_len = 64;    // gpt only
  int micro_batches = 1;        // per rank per step
  std::int64_t steps = 10;
  optim::WarmupCosineOptions schedule{};  // total_steps is set to `steps`
  // Every N steps (0: never) the ranks prove that replicas and shards agree
  // (Note [Consistency check]); a finding withholds the step's update and
  // throws ConsistencyError naming the step (next_step() stays), or with
  // consistency_warn_only is returned in the step's report.
  std::int64_t check_consistency_every = 0;
  bool consistency_warn_only = false;
  // Saves copy the state into host staging buffers and write it in the
  // background (Note [Checkpoints saved in the background]).
  bool checkpoint_async = false;
  // Without initial values given to the Trainer: a safetensors file each
  // rank reads only its shards from (Note [Streamed loading]); empty: the
  // model's own initialisation under engine.seed (Note [Sharded initialisation]).
  std::string init_from{};
  // Beside a world of device tensors only (NCCL): the same ranks over a host
  // transport (World::bootstrap), for a background save's agreements.
  CommPtr host_comm{};
};

struct StepReport {
  std::int64_t step = 0;  // 0-based
  double lr = 0;
  StepStats stats;
  double seconds = 0;  // wall time of the step on this rank
  MemoryStats memory;  // this rank's allocator after the step; its peaks are the step's own
  // This rank's bytes on the link, by kind, of the collectives the step
  // issued (Note [Bytes on the link]).
  TrafficCounts traffic;
};

class Trainer {
 public:
  // Collective over `world`. Validates the model config, the dataset against
  // the model and the batch geometry (typed errors naming the problem).
  // `initial` (by parameter name) defaults to the model's seeded init.
  Trainer(CommPtr world, TrainerConfig config, Dataset data,
          const std::map<std::string, Tensor>* initial = nullptr);

  // One optimizer step over this rank's micro-batches of step `next_step()`.
  // A skipped step that reaches the skip limit throws
  // optim::TooManySkippedStepsWith<StepReport>, its report (next_step() past it).
  StepReport step();
  std::int64_t next_step() const { return step_; }
  // Collective: saves the run's state as step next_step() (optim/checkpoint/module_checkpoint.h)
  // and returns its step directory. With checkpoint_async it returns once
  // the state is staged, the write going on in the background; the next
  // save, a resume and wait_for_checkpoint() wait for it.
  std::string save_checkpoint(const optim::CheckpointSaveOptions& options);
  // Waits for a save still being written; returns its step directory ("" when
  // none), CheckpointError (on every rank alike) when it failed.
  std::string wait_for_checkpoint();
  // Collective: loads a checkpoint of this model (any world size, strategy or
  // dtype) and continues from the step it was saved at. Returns its run JSON.
  std::string resume(const std::string& path);
  TrainingEngine& engine() { return *engine_; }
  const TrainerConfig& config() const { return config_; }
  const Dataset& data() const { return data_; }

 private:
  CommPtr world_;
  TrainerConfig config_;
  Dataset data_;
  BatchGeometry geometry_;
  std::unique_ptr<optim::WarmupCosineLr> schedule_;
  std::unique_ptr<TrainingEngine> engine_;
  // Declared after the engine, so destroyed first: it waits for its write.
  std::unique_ptr<optim::BackgroundCheckpointSaver> saver_;  // checkpoint_async only
  std::int64_t step_ = 0;
};

}  // namespace zrt::model_zoo
