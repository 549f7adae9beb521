// Fused AdamW over a zero1 shard: f32 master param, m and v (both f32, or
// both bf16: Note [bf16 AdamW moments]) updated in place from an
// f32/bf16/f16 gradient in one pass, optionally writing a bf16/f16
// copy of the updated param in the same pass. Semantics of
// torch.optim.AdamW; see Note [AdamW order of operations] in adamw_math.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

struct AdamWHyperparams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// The one rule for AdamW's hyperparameters (torch.optim.AdamW's): lr, eps and
// weight_decay finite and >= 0, betas in [0, 1). Throws InvalidArgument naming
// the field. fused_adamw applies it on every call; ZeroAdamW and zrt-train
// apply it where their options enter, so a bad value fails before any work.
void check_adamw_hyperparams(const AdamWHyperparams& hp);

// Elements [begin, end) of a shard.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

// What keys the stochastic rounding of bf16 moments (Note [bf16 AdamW
// moments]): the run's seed, the unit's stream id and the flat index of the
// shard's element 0. The step is fused_adamw's `step`.
struct AdamWRounding {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;
  std::int64_t first_index = 0;
};

struct AdamWStepOptions {
  // The gradient is multiplied by this before the update (unscaling, clipping).
  double grad_scale = 1.0;
  // If set (bf16 or f16, same numel): receives the updated param, rounded to
  // nearest even, in the same pass.
  std::optional<Tensor> param_out{};
  // bf16 moments only: the key of their stochastic rounding.
  AdamWRounding rounding{};
};

// One AdamW step (`step` >= 1 counts this step, as PyTorch's state["step"]
// after its increment). Weight decay applies only to the elements inside
// `decay_ranges` (sorted, disjoint, within the shard); the others get wd = 0.
// param: f32; exp_avg, exp_avg_sq: both f32 or both bf16; grad: f32, bf16 or
// f16; all equal numel.
void fused_adamw(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& grad, std::int64_t step, const AdamWHyperparams& hp,
                 std::span<const ElementRange> decay_ranges, const AdamWStepOptions& options = {},
                 Stream stream = {});

}  // namespace zrt::kernels
