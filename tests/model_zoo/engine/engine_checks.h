// End-to-end training runs compared across world sizes, zero3 sizes,
// strategies and micro-batch counts; shared by the local and mpirun suites.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/comm/communicator.h"

namespace zrt::testing {

// One training run's settings. Every member has an initializer, so that
// TrainSetup{.strategy = ..., .steps = ...} names only what it changes.
struct TrainSetup {
  std::string model = "gpt";  // gpt | mlp
  optim::ShardingStrategy strategy = optim::ShardingStrategy::full_shard;
  int zero3_size = 0;
  int micro_batches = 1;
  DType dtype = DType::f32;
  int steps = 10;
  bool offload_grads = false;
  int batch_size = 16;  // global sequences or rows per step
  int prefetch = 1;
  bool gather_after_update = true;  // EngineConfig::gather_after_update
  model_zoo::ActivationCheckpointing checkpointing{};
  optim::OptimizerOffload offload_optimizer{};
  optim::ReduceDType reduce_dtype = optim::ReduceDType::f32;
  optim::GatherDType gather_dtype = optim::GatherDType::compute;
  Device device = Device::cpu();  // every rank's (local ranks share cuda:0)
  bool checkpoint_async = false;  // saves write in the background
  CommPtr host_comm{};            // where those saves agree (TrainerConfig::host_comm)
  PhaseTimerPtr phase_timer{};    // times the steps' phases (Note [Step phase times]); null: none
  std::optional<optim::CpuStreams> cpu_streams{};  // unset: ZRT_CPU_STREAMS, else comm
  bool head_unit =
      false;  // gpt: ln_f and the LM head in a unit of their own (ModelConfig::head_unit)
  double max_grad_norm = 1.0;  // 0: no clipping
  // gpt: 0 is the preset's vocabulary; another folds the text's bytes into it (byte % vocab_size)
  std::int64_t vocab_size = 0;
  std::int64_t vocab_align =
      model_zoo::ModelConfig::kDefaultVocabAlign;  // gpt (Note [Padded vocabulary])
  std::uint64_t seed = 1337;                       // the init seed
  DType optimizer_state_dtype = DType::f32;        // AdamW's m and v (Note [bf16 AdamW moments])
  LinkModel link{};  // set on the world before the trainer splits its groups (Note [Link model])
};

// A GPT of the tiny preset's kind with these dimensions.
model_zoo::ModelConfig gpt_of(std::int64_t n_layer, std::int64_t n_head, std::int64_t n_embd,
                              std::int64_t vocab_size, std::int64_t block_size);
// A GPT small and odd enough for every sharding edge: 2 layers, width 6 (ln
// biases of 6 elements: fewer than some zero3 groups' ranks x 2), a
// vocabulary of 37 padded to 8 rows inside the model, 5 positions.
model_zoo::ModelConfig odd_gpt_config(bool head_unit);

// A setup of `strategy` with zero3 groups of `zero3` ranks, in `dtype`, of
// `micro` micro-batches a step, for `steps` steps; the rest as TrainSetup's.
TrainSetup sharded_setup(optim::ShardingStrategy strategy, int zero3, DType dtype, int micro,
                         int steps);
// `s` with GPT's head in a unit of its own (TrainSetup::head_unit).
TrainSetup with_head_unit(TrainSetup s);

struct TrainOutput {
  std::vector<double> losses;                         // per step, global mean
  std::map<std::string, std::vector<double>> params;  // final, fp32
};

// Trains the tiny preset of `setup.model` on the embedded dataset.
TrainOutput train_tiny(const CommPtr& world, const TrainSetup& setup);
// train_tiny on `ranks` local ranks; rank 0's output.
TrainOutput train_tiny_on_local_ranks(int ranks, const TrainSetup& setup);
// Each of `variants` trains bit for bit as `base` on `ranks` local ranks:
// the same losses and final parameters. Throws CheckFailed naming the variant.
void expect_bitwise_alike(int ranks, const TrainSetup& base,
                          const std::vector<TrainSetup>& variants);
// One setup per strategy (and one of the mlp), each with another dtype and
// micro-batch count, 4 steps: the sweep for a setting that must change no number.
std::vector<TrainSetup> one_setup_per_strategy();
// expect_bitwise_alike(ranks, s, variants_of(s)) for each s of
// one_setup_per_strategy(); the messages of those that differ (none: all alike).
std::vector<std::string> differences_per_strategy(
    int ranks, const std::function<std::vector<TrainSetup>(const TrainSetup&)>& variants_of);
// The allocator peak of the second step of `config` (trained on the embedded
// text) on one local rank.
std::size_t second_step_peak(model_zoo::TrainerConfig config);
// Note [Master in host memory], Note [Streamed saving]: on `ranks` local
// ranks on `device`, with the master in host memory, save_full_params of a
// GPT whose units' shards hold over 20 chunks of `chunk` elements writes the
// bytes of the whole-model file (`dir`/whole.st against `dir`/streamed.st)
// and adds at most the chunk's block to each rank's allocator peak. Throws
// CheckFailed naming the rank; returns each rank's bytes added.
std::vector<std::size_t> expect_save_within_chunk(int ranks, Device device, std::int64_t chunk,
                                                  std::uint64_t seed, const std::string& dir);
// Prefetch reorders gathers only: `setup` at prefetch 0 and 2 trains bit for
// bit as at 1, on `ranks` local ranks. Throws CheckFailed naming the depth.
void expect_prefetch_depths_alike(int ranks, TrainSetup setup);
// The trainer train_tiny uses, before its first step (schedule over setup.steps).
std::unique_ptr<model_zoo::Trainer> tiny_trainer(const CommPtr& world, const TrainSetup& setup);
// Steps `trainer` until next_step() == until, appending the losses.
void train_until(model_zoo::Trainer& trainer, std::int64_t until, TrainOutput& out);
// Every parameter, fp32 (collective).
std::map<std::string, std::vector<double>> full_params(model_zoo::Trainer& trainer);

// Note [Comparing training runs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// N ranks and M micro-batches sum the same gradients in another order, so
// runs differ by fp32 rounding only. Losses stay within ~5e-7 relative. AdamW
// divides by sqrt(v): for an element whose gradient is near zero the update
// is ~lr * sign(g) and rounding noise in g moves it by up to ~1e-5 after ten
// steps (one element in ~30k in tiny GPT). The attention key bias is the
// extreme case: softmax ignores a shift of all keys, so its true gradient is
// exactly zero and its elements walk on rounding noise alone. Parameters are
// therefore compared element-wise in absolute terms and per tensor in L2
// relative to max(||want||, 1).
struct Tolerance {
  double loss_rtol = 1e-5;   // per step, relative
  double param_atol = 5e-5;  // per element, absolute
  double param_rl2 = 1e-4;   // per tensor, ||got - want|| / max(||want||, 1)
};

// Throws CheckFailed naming the first loss or parameter outside `tol`.
void expect_same_training(const TrainOutput& got, const TrainOutput& want, const Tolerance& tol,
                          const std::string& what);

// Every strategy / zero3 size / micro-batch count for a world of `w` ranks.
std::vector<TrainSetup> equivalence_setups(const std::string& model, int w);
std::string describe(const TrainSetup& s);

}  // namespace zrt::testing
