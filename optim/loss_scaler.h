// Dynamic loss scaling for f16 training, as torch.cuda.amp.GradScaler, plus
// the hysteresis of Megatron-LM / DeepSpeed.
//
// Note [Loss scale updates]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The loss is multiplied by scale() before backward so small f16 gradients do
// not flush to zero; the optimizer unscales by inv_scale() inside its fused
// update. After each step, update() is told whether the (agreed) gradients
// held a NaN or Inf:
//   overflow: the growth counter restarts; one unit of hysteresis is used up;
//             when none is left, scale *= backoff_factor (and every further
//             overflow in a row backs off again), down to min_scale and no
//             further: halved without end, the scale would reach 0 in f32
//             after ~170 overflows, leaving a run (and its checkpoints) that
//             no step can continue. 1 is DeepSpeed's and Megatron-LM's
//             min_loss_scale; a scale loaded from below it (a checkpoint of a
//             scaler without the floor) is raised to it.
//   clean:    hysteresis is restored; after growth_interval clean steps in a
//             row, scale *= growth_factor.
// With hysteresis = 1 this is GradScaler, but for the floor below. bf16 and f32 have the range
// of f32 and need no scaling: a disabled scaler keeps scale 1.
// A state loaded (a resume) keeps its scale and counts under this scaler's
// settings, which may differ from those it was saved under: a growth
// tracker at or past growth_interval grows at the next clean step, a
// hysteresis count past hysteresis is cut to it, and a scale below
// min_scale is raised to it. (GradScaler's load_state_dict takes the
// settings from the checkpoint too; here the run's own settings win.)
#pragma once

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::optim {

struct LossScalerOptions {
  bool enabled = true;          // false: scale() stays 1, update() only counts
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  int hysteresis = 1;      // overflows in a row tolerated before the first backoff
  double min_scale = 1.0;  // the backoff stops here
};

// Scaling on for f16 compute, off for bf16 and f32.
LossScalerOptions loss_scaler_options_for(DType param_dtype);

class DynamicLossScaler {
 public:
  // What a checkpoint saves and restores.
  struct State {
    double scale = 1.0;
    std::int64_t growth_tracker = 0;  // clean steps since the last overflow or growth
    int hysteresis_left = 1;
  };

  explicit DynamicLossScaler(LossScalerOptions options = {});

  double scale() const { return state_.scale; }
  double inv_scale() const { return 1.0 / state_.scale; }
  bool enabled() const { return options_.enabled; }
  const LossScalerOptions& options() const { return options_; }
  // See Note [Loss scale updates]. `found_non_finite` must agree on all ranks.
  void update(bool found_non_finite);

  const State& state() const { return state_; }
  void load_state(const State& state);  // disabled: the scale loaded is not taken (stays 1)

 private:
  LossScalerOptions options_;
  State state_;
};

}  // namespace zrt::optim
