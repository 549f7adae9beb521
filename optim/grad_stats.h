// The global gradient statistics one optimizer step decides on: the squared
// L2 norm over every handle and rank, and whether any element is non-finite.
//
// Note [Global gradient norm over zero1 shards]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// After post_backward(sync_grads=true) each element of the reduced gradient
// lives in exactly one zero1 shard of a zero1 group, so summing the shards'
// squared norms over the zero1 group gives the full norm; replica groups
// (hybrid sharding, no-shard) hold identical copies, which must not be counted again.
// They are combined with `max` instead, which also makes every replica agree
// on the same bits of the norm (and so on the same clip coefficient) and on
// the non-finite flag. The flag travels as a count in the same all-reduce.
// Each handle's two numbers are reduced on their own (one collective per
// group carries every handle's) and summed on the host in handle order, so
// the host waits once per step for all of them.
#pragma once

#include <span>

#include "zrt/optim/flat_param/flat_param_handle.h"

namespace zrt::optim {

struct GradStats {
  double squared_norm = 0;     // of the gradients as stored (still loss-scaled)
  bool non_finite = false;     // some rank holds a NaN or Inf (squared_norm is then meaningless)
  bool settings_agree = true;  // every rank passed the same `settings` digest
};

// Collective over the handles' zero1 group (and replica group, if any): every
// rank gets the same result. The handles must share their groups.
// `settings` is a digest of what the step will apply (Note [Ranks agree on
// each step's settings]); its agreement travels in the same collectives.
GradStats global_grad_stats(std::span<FlatParamHandle* const> handles, std::uint64_t settings = 0);

// torch.nn.utils.clip_grad_norm_: max_norm / (total_norm + 1e-6), at most 1.
double clip_coefficient(double total_norm, double max_norm);

}  // namespace zrt::optim
