// ZeroAdamW checks written once against a world communicator, run on the
// local backend (unit) and under mpirun (mpi), compared with single-process
// torch.optim.AdamW + clip_grad_norm_ on the same values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <vector>

#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/optim/zero_adamw.h"
#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/tensor.h"

namespace zrt::testing {

// A training run the reference can replay: shapes, initial values, the
// rank-averaged gradient of each clean step, the lr of each step, and two
// steps (an Inf, then a NaN on the last rank) the reference never sees.
struct AdamWScenario {
  std::uint64_t seed = 0;
  std::vector<Shape> shapes;
  std::size_t first_handle_params = 0;    // handle 0 holds shapes [0, this), handle 1 the rest
  std::vector<std::vector<double>> init;  // per parameter
  std::vector<std::vector<std::vector<double>>> grads;  // per clean step, per parameter
  std::vector<double> lrs;                              // per clean step
  std::vector<bool> clipped;  // per clean step: gradients x100, clipping fires
  int bad_before = 2;         // the two non-finite steps come before this clean step
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1, max_grad_norm = 100;
};

struct AdamWExpected {
  std::vector<std::vector<double>> params, exp_avg, exp_avg_sq;  // per parameter, flattened
  std::vector<double> norms;                                     // per clean step
};

// The same scenario on every rank that passes the same seed.
AdamWScenario make_adamw_scenario(std::uint64_t seed);

// Writes the scenario into `dir` and runs the PyTorch reference there
// (throws CheckFailed naming the command when it fails).
void run_torch_reference(const AdamWScenario& s, const std::filesystem::path& dir);
// Reads what run_torch_reference left in `dir`.
AdamWExpected read_torch_reference(const AdamWScenario& s, const std::filesystem::path& dir);

// Drives two handles and a ZeroAdamW through the scenario on this rank:
// per-rank gradients averaging to the scenario's, set through the handles'
// gradient views with a dynamic loss scale; the non-finite steps are skipped
// on every rank bit for bit; the final parameters (gathered by the next
// unshard), m, v and every norm match the reference.
void check_zero_adamw(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                      const AdamWScenario& s, const AdamWExpected& expected);

// Each parameter's final value, m and v, whole (per parameter, flattened).
struct AdamWFinal {
  std::vector<std::vector<double>> params, exp_avg, exp_avg_sq;
};

// The scenario's clean steps (no clipping, no loss scale: every rank's
// update sees exactly the scenario's gradients) with `options`' state dtype
// and rounding seed and `offload` (host: the handles' masters in host
// memory); this rank writes its shards' values into `out` (sized by the
// first caller) under `mutex`, and throws CheckFailed when a value another
// rank wrote (a replica) differs in any bit.
void run_final_state(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                     const AdamWScenario& s, optim::AdamWOptions options,
                     const optim::OptimizerOffload& offload, AdamWFinal& out, std::mutex& mutex);

// max_consecutive_skips = 2: two non-finite steps in a row throw
// TooManySkippedSteps on every rank, and nothing was updated.
void check_skip_limit(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size);

// Ranks stepping with another lr, other AdamW options (the decay policy
// among them) or another step count
// (the last rank alone, or the upper half of the world) throw InvalidArgument
// on every rank, and nothing was updated; the same settings step.
void check_settings_agree(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size);

}  // namespace zrt::testing
