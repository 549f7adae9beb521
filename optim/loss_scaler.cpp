#include "zrt/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "zrt/runtime/error.h"

namespace zrt::optim {

LossScalerOptions loss_scaler_options_for(DType param_dtype) {
  LossScalerOptions o;
  o.enabled = param_dtype == DType::f16;
  return o;
}

DynamicLossScaler::DynamicLossScaler(LossScalerOptions options) : options_(options) {
  const auto& o = options_;
  // The loss is scaled in fp32: a scale past its range is inf there.
  ZRT_CHECK_ARG(o.init_scale > 0 && o.init_scale <= std::numeric_limits<float>::max(),
                "DynamicLossScaler: init_scale must be positive and finite in fp32 (got ",
                o.init_scale, ")");
  ZRT_CHECK_ARG(std::isfinite(o.growth_factor) && o.growth_factor > 1,
                "DynamicLossScaler: growth_factor must be > 1 (got ", o.growth_factor, ")");
  ZRT_CHECK_ARG(o.backoff_factor > 0 && o.backoff_factor < 1,
                "DynamicLossScaler: backoff_factor must be in (0, 1) (got ", o.backoff_factor, ")");
  ZRT_CHECK_ARG(o.growth_interval >= 1, "DynamicLossScaler: growth_interval must be >= 1 (got ",
                o.growth_interval, ")");
  ZRT_CHECK_ARG(o.hysteresis >= 1, "DynamicLossScaler: hysteresis must be >= 1 (got ", o.hysteresis,
                ")");
  ZRT_CHECK_ARG(std::isfinite(o.min_scale) && o.min_scale > 0 && o.min_scale <= o.init_scale,
                "DynamicLossScaler: min_scale must be positive and at most init_scale ",
                o.init_scale, " (got ", o.min_scale, ")");
  state_.scale = o.enabled ? o.init_scale : 1.0;
  state_.hysteresis_left = o.hysteresis;
}

void DynamicLossScaler::update(bool found_non_finite) {
  if (!options_.enabled) return;
  // See Note [Loss scale updates].
  if (found_non_finite) {
    state_.growth_tracker = 0;
    if (state_.hysteresis_left > 0) --state_.hysteresis_left;
    if (state_.hysteresis_left == 0)
      state_.scale = std::max(state_.scale * options_.backoff_factor, options_.min_scale);
    return;
  }
  state_.hysteresis_left = options_.hysteresis;
  if (++state_.growth_tracker == options_.growth_interval) {
    state_.growth_tracker = 0;
    const double grown = state_.scale * options_.growth_factor;
    // GradScaler: never grow into Inf, here in the fp32 the loss is scaled in.
    if (grown <= std::numeric_limits<float>::max()) state_.scale = grown;
  }
}

void DynamicLossScaler::load_state(const State& state) {
  ZRT_CHECK_ARG(std::isfinite(state.scale) && state.scale > 0,
                "the loss scaler state loaded (a checkpoint's): scale must be positive (got ",
                state.scale, ")");
  ZRT_CHECK_ARG(state.growth_tracker >= 0,
                "the loss scaler state loaded (a checkpoint's): growth_tracker ",
                state.growth_tracker, " is negative");
  ZRT_CHECK_ARG(state.hysteresis_left >= 0,
                "the loss scaler state loaded (a checkpoint's): hysteresis_left ",
                state.hysteresis_left, " is negative");
  // Note [Loss scale updates]: counters past this scaler's settings are capped.
  state_ = state;
  state_.growth_tracker = std::min(state_.growth_tracker, options_.growth_interval - 1);
  state_.hysteresis_left = std::min(state_.hysteresis_left, options_.hysteresis);
  state_.scale = std::max(state_.scale, options_.min_scale);
  // Disabled, the scale stays 1 (an f16 run's state loaded by a bf16 one):
  // a step would otherwise divide the gradients by it.
  if (!options_.enabled) state_.scale = 1.0;
}

}  // namespace zrt::optim
