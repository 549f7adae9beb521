// The training engine: a model-zoo Model on a ZeroModule. Its wrap units are
// the module's units; one training step = micro-batches of forward and
// backward through the model's stages in the module's scopes, with the next
// stages' units prefetched, gradient reduction after the last micro-batch,
// then the module's step (ZeroAdamW on the zero1 shards). Checkpoints are the
// module's (optim/checkpoint/module_checkpoint.h).
//
// Note [One step of the engine]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Forward walks the model's stages; before a stage the handle of its unit is
// unsharded (pre_forward) and after it resharded (post_forward), so under
// full sharding only the current unit and the prefetched ones are unsharded
// at a time (grad-op keeps each unit from its forward to its backward,
// no-shard keeps all). Backward walks the stages in reverse
// with pre_backward / post_backward. A unit used by several stages (the GPT
// embedding and tied head) accumulates into its fp32 gradient at each use;
// only the last use of the last micro-batch synchronises (reduce-scatter).
// With the GPT head in a unit of its own (ModelConfig::head_unit) the head's
// use of wte is a tie across units: its gradient goes into unit 0's fp32
// gradient when the head's backward ends, before unit 0's own backward,
// the last stage of the walk (Note [Parameters tied across units]).
// The loss is the mean over every target of the GLOBAL batch: each
// micro-batch's loss is its sum divided by the global target count, and
// gradients are summed (not averaged) across ranks, so every world size,
// zero3 size, strategy and micro-batch count computes the same update.
// With prefetch depth d, the units of the next d stages (forward) or previous
// d stages (backward) are unsharded before the current stage computes; on
// CUDA their all-gathers run on the communication stream, overlapping the
// compute (Note [Unshard on the communication stream]), at the price of up
// to d + 1 unsharded units at a time instead of one. d = 0 gathers each unit
// just before its stage (least memory, no overlap). Checkpointed blocks run
// their forward a second time in backward (Note [Activation checkpointing]).
//
// Note [One host wait per step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The engine's host waits for the device once per step, when the optimizer
// reads the gradient statistics (Note [One optimizer step]). Around it:
//   - a micro-batch on the host goes up through pinned staging, copied
//     asynchronously (a copy from pageable memory waits for its stream);
//   - each micro-batch's loss stays on the device; after the last, the loss
//     values widened to f64 and the step's target count are all-reduced
//     over the world and copied down to pinned host memory, all queued
//     before the optimizer's statistics, so by the time those are read the
//     losses are there too: the engine waits on their event only to make
//     that order explicit, and that wait never blocks. The host sums the
//     world's micro-batch losses in micro-batch order, in double.
// On a CPU device host memory is the device's: batches are not staged, and
// the same queue orders the read. On CUDA the token ids are range-checked on
// the device into a flag (Note [Device id checks] in kernels/nn/id_check.h);
// every rank's flag is all-gathered over the world (no one reduction op fits
// its three words), comes down with the losses and is read before anything
// is updated: a bad id on any rank ends the step on every rank with the
// parameters untouched. (What else waits: the consistency check and host
// offload, when asked.)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zrt/model_zoo/engine/activation_checkpointing.h"
#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/model_zoo/models/model.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/phase_timer.h"

namespace zrt::model_zoo {

// Note [Options owned by their layer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A setting is declared once, in the options of the layer where it acts,
// and checked there, where it enters; a layer above holds the options of
// the one below whole instead of repeating their fields and copying them
// across: TrainerConfig::engine is an EngineConfig, EngineConfig::zero the
// ZeroModuleOptions of the engine's module. A new module setting is then
// one field in ZeroModuleOptions (and its flag), not a field at every
// level with a copy between each pair. The engine sets only its own rule
// on what it passes down: gradients reduce with sum. Below the module, the
// gradient's settings (GradReduceOptions) are declared beside the flat
// parameter that applies them and reach each handle whole. At the top,
// zrt-train binds its flags to these fields directly (TrainOptions::trainer,
// a TrainerConfig: the model, batch, schedule and engine), resolves the
// defaults that hang on other flags once after parsing, and the ranks agree
// on every parsed flag, so a setting is one declaration, one flag and one
// check, however deep it acts.
struct EngineConfig {
  // The module under the engine: sharding, dtypes, device, offload, AdamW,
  // tracing, memory. Its grad_reduce.op is the engine's: sum (Note [One step
  // of the engine]).
  optim::ZeroModuleOptions zero{};
  int prefetch = 1;  // stages whose units are unsharded ahead (0, 1 or 2)
  // With prefetch: the next step's first prefetch + 1 stages' units are
  // gathered as soon as their update is issued, not at the next step's start
  // (Note [Gathers after the update] in zero_module.cpp); the same numbers.
  bool gather_after_update = true;
  ActivationCheckpointing
      checkpointing{};  // blocks that keep only their input (Note [Activation checkpointing])
  std::uint64_t seed = 1337;
  PhaseTimerPtr phase_timer{};  // times forward, backward, optimizer and the world's collectives
                                // (Note [Step phase times]); null: none
};

struct StepStats {
  double loss = 0;       // mean over the global batch
  double grad_norm = 0;  // before clipping
  bool skipped = false;  // non-finite gradients: no update
  double loss_scale = 1;
  std::int64_t tokens = 0;  // targets in the global batch
  // Asked for: what the consistency check found before the update (Note
  // [Consistency check]), the same on every rank; empty when ranks agree.
  std::vector<std::string> inconsistencies;
  // ConsistencyCheck::stop found some: the update was not applied (the
  // gradients stay reduced; the run is meant to end here).
  bool update_withheld = false;
};

// Whether a step proves replicas and shards agree before its update, and
// what a finding does: nothing more (warn), or no update (stop).
enum class ConsistencyCheck { off, warn, stop };

// Note [Sharded initialisation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Without initial values the engine starts the model from its param_inits
// under config.seed, and no rank ever holds the whole model: each primary
// parameter enters the module as an unbacked stand-in (its shape and the
// identity ties need) with an init function, and each handle draws only
// the elements of its own fp32 zero1 shard, where the shard lives (host or
// device), by the counter-based generator (Note [Counter-based parameter
// init]). Since element i of a parameter is a function of (seed, name, i)
// alone, the weights are bit for bit those of model.init_params(seed) at
// every world size, strategy and device, and a rank's memory at
// initialisation is its share of the state.
class TrainingEngine {
 public:
  // Collective over `world`. `initial` holds every primary parameter (any
  // dtype, cpu), e.g. model.init_params(seed) or a loaded checkpoint.
  TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config,
                 const std::map<std::string, Tensor>& initial);
  // Collective: the model's own initial values under config.seed, each rank
  // drawing only its shards (Note [Sharded initialisation]).
  TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config);
  // Collective: initial values read from `file`, each rank only its shards
  // (Note [Streamed loading]); a bad value throws the same error on every rank.
  TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config,
                 const ParamFileSource& file);
  ~TrainingEngine();

  // One optimizer step over this rank's micro-batches of the global batch.
  // With a check, the ranks prove they agree after the gradient reduction
  // and before the update, when every zero3 shard is current (Note
  // [Consistency check]); with `stop` a finding withholds the update. A
  // skipped step that reaches AdamWOptions::max_consecutive_skips throws
  // optim::TooManySkippedStepsWith<StepStats>, its statistics.
  StepStats step(const std::vector<Batch>& micro_batches, double lr,
                 ConsistencyCheck check = ConsistencyCheck::off);

  // Collective: every primary parameter in fp32 on cpu, by name.
  std::map<std::string, Tensor> full_params();

  const Model& model() const { return *model_; }
  optim::ZeroModule& module() { return *module_; }
  const std::vector<std::unique_ptr<optim::FlatParamHandle>>& handles() const {
    return module_->handles();
  }
  MemoryStats memory_stats() const { return module_->memory_stats(); }
  const EngineConfig& config() const { return config_; }
  const CommPtr& world() const { return module_->world(); }
  optim::ZeroAdamW& optimizer() { return module_->optimizer(); }
  optim::DynamicLossScaler* loss_scaler() { return module_->loss_scaler(); }  // f16 only, else null

 private:
  // Values from `initial`, else read from `file`, else drawn (Note [Sharded initialisation]).
  TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config,
                 const std::map<std::string, Tensor>* initial, const ParamFileSource* file);
  // The micro-batch on the engine's device and caching allocator.
  Batch home(const Batch& batch) const;
  // The micro-batch's loss: one element on the device, in stream order.
  Tensor forward(const Batch& batch);
  void backward(const Batch& batch, const Tensor& dloss, bool sync_grads);
  // Queues the world's sums of each micro-batch's loss (on the device, one
  // each) and of the targets, and their copy to loss_sums_host_; `copied`
  // completes when it holds them (Note [One host wait per step]).
  // With an id flag (CUDA), gathers every rank's and queues their copy to id_flag_host_ too.
  void queue_loss_sums(const Tensor& losses, std::int64_t local_tokens, double normaliser,
                       const Tensor& id_flag, Event& copied);
  Stream stream() const { return module_->stream(); }
  PhaseTimer* phase_timer() const { return config_.phase_timer.get(); }

  // Prefetches the units of the `prefetch` stages after (forward, step +1) or
  // before (backward, step -1) `stage`.
  void prefetch(int stage, int step);
  // A trace event on the compute track (nothing without a tracer); the
  // category says what the rank's thread does (Note [Trace timeline]).
  Tracer::Scope traced(const char* what, const std::string& unit = {},
                       const char* category = "compute") const;
  // Opens unit u's forward or backward scope, which waits for its gather:
  // traced as "wait", so the compute events hold computation only.
  optim::ZeroModule::Scope enter(optim::ZeroModule::Unit u, bool backward, bool sync);
  // The unit whose parameters stage `stage` computes with.
  optim::ZeroModule::Unit stage_unit(int stage) const;

  // Declared first, destroyed last: the model's views keep the module's memory alive.
  std::unique_ptr<optim::ZeroModule> module_;
  std::unique_ptr<Model> model_;
  EngineConfig config_;
  std::vector<optim::ZeroModule::Unit> units_;  // add_unit's, in the model's order
  std::vector<int> last_backward_stage_;        // per unit: stage whose backward syncs
  std::vector<bool>
      checkpointed_;  // per stage: keeps only its input (Note [Activation checkpointing])
  std::vector<Tensor> kept_inputs_;  // per checkpointed stage: its input, from forward to backward
  struct StageInput {
    Shape shape;
    DType dtype = DType::f32;
  };
  std::vector<StageInput> stage_inputs_;  // per stage: its forward's input, which dx must match
  // Gathered right after their update (Note [Gathers after the update]).
  std::vector<optim::ZeroModule::Unit> first_units_;
  AllocatorPtr pinned_;  // CUDA: staging of batches and the loss read; null on the CPU
  // The world's micro-batch losses, the target count, and the sums of the
  // ranks' normalisers and of their squares.
  Tensor loss_sums_host_;
  Tensor id_flag_host_;  // CUDA: every rank's token-id flag of the step, read with the losses
};

}  // namespace zrt::model_zoo
