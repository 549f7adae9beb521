// ZeroAdamW: torch.optim.AdamW over the zero1 shards of a set of
// FlatParamHandles, with global gradient clipping, agreed skipping of steps
// with non-finite gradients, and loss-scale unscaling, in one fused pass per
// handle.
//
// Note [One optimizer step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Called after post_backward(sync_grads=true) on every handle, on every rank:
//   1. One pass over each zero1 gradient shard gives its squared norm and a
//      non-finite flag; one small all-reduce makes them global and agreed
//      (Note [Global gradient norm over zero1 shards]).
//   2. Non-finite: the step is skipped on every rank. Parameters, m, v and the
//      step count are untouched, the skip is counted and reported, and after
//      max_consecutive_skips skips in a row TooManySkippedSteps is thrown
//      (TooManySkippedStepsWith<StepResult>: the step's result with it).
//   3. Otherwise grad_norm = sqrt(sum) / loss_scale, the unscaled norm (what
//      clip_grad_norm_ returns after GradScaler.unscale_). The unscaling and
//      the clip coefficient fold into the fused AdamW kernel's grad_scale, so
//      the gradient is read once and never rewritten.
//   4. Each handle is marked updated: its next unshard casts the new fp32
//      master to the compute dtype and gathers it. `after_update(k)` runs
//      right after handle k's update is issued (with disk offload, once
//      its last chunk's update has run), before the next handle's (the
//      module gathers the next step's first units there: Note [Gathers
//      after the update] in zero_module.cpp).
// m and v are fp32 (or bf16, AdamWOptions::state_dtype), shaped and sharded
// exactly like each zero1 shard, where the master is: on the handle's device
// from its allocator, or in host memory with it (Note [Master in host
// memory]).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "zrt/kernels/ops/adamw.h"
#include "zrt/optim/decay_policy.h"
#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/loss_scaler.h"
#include "zrt/optim/offloaded_moments.h"
#include "zrt/optim/optim_error.h"
#include "zrt/optim/optimizer_offload.h"

namespace zrt::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;  // applied to parameters `decays` selects
  DecayPolicy decays = decay_matrices;
  double max_grad_norm = 0;       // > 0: clip by global L2 norm; 0: no clipping
  int max_consecutive_skips = 0;  // > 0: throw after this many skips in a row; 0: never
  // m and v: f32, or bf16 rounded stochastically (Note [bf16 AdamW moments]
  // in kernels/ops/adamw_math.h); the master stays f32.
  DType state_dtype = DType::f32;
  // Seeds that rounding (the engine passes its EngineConfig::seed).
  std::uint64_t rounding_seed = 0;
};

struct StepResult {
  double grad_norm =
      0;  // global L2 norm of the unscaled gradients, before clipping (non-finite when skipped)
  bool skipped = false;            // non-finite gradients: nothing was updated
  std::int64_t skipped_total = 0;  // skipped steps so far, this one included
  std::int64_t consecutive_skips = 0;
  double loss_scale = 1;  // the scale this step's gradients carried
  double clip_coef = 1;   // factor applied to the unscaled gradients (1: no clipping)
  double lr = 0;
  std::int64_t step = 0;  // optimizer steps taken, this one included
};

// Throws InvalidArgument naming the first bad field (the hyperparameters
// follow kernels::check_adamw_hyperparams).
void check_adamw_options(const AdamWOptions& options);

// Sets a step's flag for its lifetime (Note [No step inside a step]).
class SteppingFlag {
 public:
  explicit SteppingFlag(bool& flag) : flag_(flag) { flag_ = true; }
  ~SteppingFlag() { flag_ = false; }
  SteppingFlag(const SteppingFlag&) = delete;
  SteppingFlag& operator=(const SteppingFlag&) = delete;

 private:
  bool& flag_;
};

class ZeroAdamW {
 public:
  // `handles` (not owned; they must outlive the optimizer) share the same
  // groups; every rank passes its handles in the same order. Decay ranges
  // are computed here, once. `offload` disk keeps m and v in a scratch file
  // (Note [Optimizer state on disk]) and needs every handle on one stream;
  // host keeps m and v beside the handles' masters in host memory and runs
  // the update there (Note [Master in host memory]); it needs handles built
  // with FlatParamOptions::master_on_host, and only those.
  ZeroAdamW(std::vector<FlatParamHandle*> handles, AdamWOptions options = {},
            OptimizerOffload offload = {});
  ZeroAdamW(const ZeroAdamW&) = delete;
  ZeroAdamW& operator=(const ZeroAdamW&) = delete;

  // One step (Note [One optimizer step]), collective over the handles'
  // groups. With a scaler, the gradients are unscaled by 1 / scaler->scale()
  // and the scaler is updated from the agreed non-finite flag.
  // `before_update`, when given, runs after the statistics' host read (the
  // step's one wait for the device) and before the scaler, the counters or
  // any shard changes: a caller's check of values it queued before the step
  // (the engine's token-id flag) that ends the step with nothing changed.
  // `after_update(k)`, when given, runs once handle k is updated and marked,
  // before handle k + 1's update (not on a skipped step). A step() or a
  // load of counters or moments made from either is refused (Note [No step
  // inside a step]).
  StepResult step(double lr, DynamicLossScaler* scaler = nullptr,
                  const std::function<void()>& before_update = {},
                  const std::function<void(std::size_t)>& after_update = {});

  const AdamWOptions& options() const { return options_; }
  bool stepping() const { return stepping_; }  // step() runs (Note [No step inside a step])
  std::size_t num_handles() const { return handles_.size(); }
  FlatParamHandle& handle(std::size_t k) const;
  std::span<const kernels::ElementRange> decay_ranges(std::size_t k) const;

  // --- state, for checkpoints ---------------------------------------------
  std::int64_t step_count() const { return step_; }
  std::int64_t skipped_total() const { return skipped_total_; }
  std::int64_t consecutive_skips() const { return consecutive_skips_; }
  // Restores the counters a checkpoint saved (all >= 0).
  void load_counters(std::int64_t step, std::int64_t skipped_total, std::int64_t consecutive_skips);
  // m / v of handle k's zero1 shard (same numel as zero1_shard(), dtype
  // options().state_dtype): the state itself, or with disk offload a copy
  // read from the scratch file.
  Tensor exp_avg_shard(std::size_t k) const;
  Tensor exp_avg_sq_shard(std::size_t k) const;
  // Replaces m and v of handle k (a checkpoint's, any float dtype: cast
  // with round-to-nearest-even to the state dtype), in `stream` order.
  void load_moments(std::size_t k, const Tensor& exp_avg, const Tensor& exp_avg_sq, Stream stream);
  const OptimizerOffload& offload() const { return offload_; }
  // The scratch file of disk offload; null otherwise.
  const OffloadedMoments* offloaded_moments() const { return moments_.get(); }
  // Original parameter i of handle k: its flattened slice of m / v, aligned
  // with handle(k).sharded_param(i) (size 0 when this rank holds none of it).
  Tensor exp_avg(std::size_t k, std::size_t i) const;
  Tensor exp_avg_sq(std::size_t k, std::size_t i) const;

 private:
  struct ShardState {
    FlatParamHandle* handle;
    Tensor exp_avg, exp_avg_sq;  // empty with disk offload
    std::vector<kernels::ElementRange> decay_ranges;
    kernels::AdamWRounding rounding;  // bf16 moments (Note [bf16 AdamW moments])
  };
  const ShardState& at(std::size_t k) const;
  // What this step applies, for the ranks to agree on (Note [Ranks agree on
  // each step's settings] in grad_stats.cpp).
  std::uint64_t settings_digest(double lr, double inv_loss_scale) const;
  Tensor param_slice(const Tensor& shard, std::size_t k, std::size_t i, const char* suffix) const;

  // AdamW on the offloaded moments, chunk by chunk; `updated(k)` once handle
  // k's last chunk is updated (OffloadedMoments::update_all).
  void step_offloaded(const kernels::AdamWHyperparams& hp,
                      const kernels::AdamWStepOptions& step_options,
                      const std::function<void(std::size_t)>& updated);

  AdamWOptions options_;
  OptimizerOffload offload_;
  std::unique_ptr<OffloadedMoments> moments_;  // disk offload only
  std::vector<FlatParamHandle*> raw_handles_;  // for global_grad_stats
  std::vector<ShardState> handles_;
  std::int64_t step_ = 0;
  bool stepping_ = false;  // step() runs (Note [No step inside a step])
  std::int64_t skipped_total_ = 0;
  std::int64_t consecutive_skips_ = 0;
  std::uint64_t decay_digest_ = 0;  // which parameters options_.decays selects, for settings_digest
};

}  // namespace zrt::optim
