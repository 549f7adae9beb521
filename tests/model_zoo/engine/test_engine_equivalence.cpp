// N local ranks train the same model as one rank: for every strategy, zero3
// size and micro-batch count, losses and final parameters match the 1-rank,
// 1-micro-batch run within 1e-5 (fp32, CPU). bf16 trains and stays near fp32,
// and so does bf16 optimizer state; int8 parameter gathers and int8 or int4
// gradient reductions stay near their defaults. A step refuses micro-batches
// without their normaliser.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "tests/support/rank_check.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/engine/training_engine.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace zrt::testing;

namespace {

TrainOutput reference(const std::string& model, DType dtype = DType::f32) {
  TrainOutput out;
  TrainSetup s;
  s.model = model;
  s.dtype = dtype;
  run_local_ranks(1, [&](const CommPtr& w) { out = train_tiny(w, s); });
  return out;
}

void check_world(const std::string& model, int w) {
  const TrainOutput ref = reference(model);
  for (const auto& setup : equivalence_setups(model, w)) {
    try {
      run_local_ranks(
          w,
          [&](const CommPtr& world) {
            expect_same_training(train_tiny(world, setup), ref, {}, describe(setup));
          },
          std::chrono::seconds(60));
    } catch (const std::exception& e) {
      BOOST_ERROR(w << " ranks: " << e.what());
    }
  }
}

// Each strategy with its zero3 size on 4 ranks.
std::vector<std::pair<optim::ShardingStrategy, int>> strategies_on_four_ranks() {
  return {{optim::ShardingStrategy::full_shard, 4},
          {optim::ShardingStrategy::shard_grad_op, 4},
          {optim::ShardingStrategy::no_shard, 1},
          {optim::ShardingStrategy::hybrid_shard, 2},
          {optim::ShardingStrategy::layer_zero, 2}};
}

// For every strategy on 4 ranks, in f32 and bf16: the losses with `int8`
// (a quantized gather or reduce, int8 or int4) applied stay within 1% of
// those without, differ from them (the values really crossed quantized)
// except under no-shard, whose zero1 groups of one communicate nothing
// quantized, and a second run repeats the first bit for bit.
void expect_int8_close_and_repeatable(const std::function<void(TrainSetup&)>& int8) {
  for (const auto& [strategy, zero3] : strategies_on_four_ranks()) {
    for (const DType dtype : {DType::f32, DType::bf16}) {
      TrainSetup s = sharded_setup(strategy, zero3, dtype, 1, 8);
      const TrainOutput plain = train_tiny_on_local_ranks(4, s);
      int8(s);
      const TrainOutput quantized = train_tiny_on_local_ranks(4, s);
      BOOST_TEST_CONTEXT(optim::strategy_name(strategy) << " " << dtype_name(dtype)) {
        double worst = 0;
        for (std::size_t i = 0; i < plain.losses.size(); ++i)
          worst =
              std::max(worst, std::abs(quantized.losses[i] - plain.losses[i]) / plain.losses[i]);
        BOOST_TEST(worst <= 1e-2);
        BOOST_TEST((worst > 0) == (strategy != optim::ShardingStrategy::no_shard));
        try {
          expect_bitwise_alike(4, s, {s});
        } catch (const std::exception& e) {
          BOOST_ERROR(e.what());
        }
      }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_equivalence)

BOOST_AUTO_TEST_CASE(gpt_matches_one_rank) {
  for (int w : {1, 2, 4}) check_world("gpt", w);
}

BOOST_AUTO_TEST_CASE(mlp_matches_one_rank) {
  for (int w : {1, 2, 4}) check_world("mlp", w);
}

BOOST_AUTO_TEST_CASE(offloaded_gradients_match) {
  const TrainOutput ref = reference("gpt");
  TrainSetup s;
  s.offload_grads = true;
  s.micro_batches = 2;
  try {
    run_local_ranks(2, [&](const CommPtr& world) {
      expect_same_training(train_tiny(world, s), ref, {}, describe(s));
    });
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

BOOST_AUTO_TEST_CASE(bf16_trains_close_to_fp32) {
  TrainOutput f32 = reference("gpt"), bf16;
  TrainSetup s;
  s.dtype = DType::bf16;
  s.steps = 20;
  run_local_ranks(2, [&](const CommPtr& world) {
    auto out = train_tiny(world, s);
    if (world->rank() == 0) bf16 = out;
  });
  TrainSetup s32;
  s32.steps = 20;
  run_local_ranks(1, [&](const CommPtr& world) { f32 = train_tiny(world, s32); });
  BOOST_TEST(bf16.losses.back() < bf16.losses.front() - 0.5);  // it learns
  for (std::size_t i = 0; i < f32.losses.size(); ++i)
    BOOST_TEST(std::abs(bf16.losses[i] - f32.losses[i]) <= 2e-2 * f32.losses[i], "step " << i);
}

BOOST_AUTO_TEST_CASE(bf16_optimizer_state_trains_close_to_fp32_state) {
  // Note [bf16 AdamW moments]: the same run with bf16 m and v, on 2 ranks
  // and on 1, follows the fp32-state run's losses closely.
  TrainSetup s32;
  s32.steps = 20;
  TrainSetup s16 = s32;
  s16.optimizer_state_dtype = DType::bf16;
  const TrainOutput f32 = train_tiny_on_local_ranks(1, s32);
  for (int w : {1, 2}) {
    const TrainOutput bf16 = train_tiny_on_local_ranks(w, s16);
    BOOST_TEST(bf16.losses.back() < bf16.losses.front() - 0.5);  // it learns
    for (std::size_t i = 0; i < f32.losses.size(); ++i)
      BOOST_TEST(std::abs(bf16.losses[i] - f32.losses[i]) <= 5e-3 * f32.losses[i],
                 w << " ranks, step " << i);
  }
}

BOOST_AUTO_TEST_CASE(prefetch_depth_changes_no_number) {
  // Prefetch reorders gathers only: for every strategy on 4 ranks, depths 0
  // and 2 train bit for bit as depth 1 does. With the module's CPU streams
  // (Note [Streams of a CPU module]) the gathers run on the communication
  // thread, ahead of compute by the depth, so this is the sweep that
  // ThreadSanitizer runs for each stream mode (tools/sanitize.sh).
  for (const auto& [strategy, zero3] : strategies_on_four_ranks()) {
    const TrainSetup s = sharded_setup(strategy, zero3, DType::f32, 2, 4);
    try {
      expect_prefetch_depths_alike(4, s);
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(int8_parameter_gather_trains_close_and_repeats) {
  // Note [Quantized parameter gather]
  expect_int8_close_and_repeatable(
      [](TrainSetup& s) { s.gather_dtype = optim::GatherDType::int8; });
}

BOOST_AUTO_TEST_CASE(int8_gradient_reduction_trains_close_and_repeats) {
  // Note [Quantized gradient reduce-scatter]
  expect_int8_close_and_repeatable(
      [](TrainSetup& s) { s.reduce_dtype = optim::ReduceDType::int8; });
}

BOOST_AUTO_TEST_CASE(int4_gradient_reduction_trains_close_and_repeats) {
  // Note [Blockwise int4 quantization]: 15 levels a block, 8 steps within 1%.
  expect_int8_close_and_repeatable(
      [](TrainSetup& s) { s.reduce_dtype = optim::ReduceDType::int4; });
}

namespace {
// Note [Gathers after the update]: the variants of `base` that gather the next
// step's first units early or not, at prefetch 0-2 (0 gathers nothing early),
// with the collectives on a communication stream (comm, or ZRT_CPU_STREAMS)
// and on the rank's thread (none) and, with `disk` set, with the moments on
// disk (each unit gathered once its last chunk is updated; chunks of 999
// elements cut units) at each depth, early and not.
std::vector<TrainSetup> gather_variants(const TrainSetup& base,
                                        const optim::OptimizerOffload* disk) {
  std::vector<TrainSetup> variants(5, base);
  variants[0].gather_after_update = false;
  variants[1].prefetch = 2;
  variants[2].prefetch = 2;
  variants[2].gather_after_update = false;
  variants[3].prefetch = 0;
  // Collectives on the rank's thread: a gather issued before its unit's
  // update would read the old master at once, not race the update.
  variants[4].cpu_streams = optim::CpuStreams::none;
  if (disk == nullptr) return variants;
  variants.push_back(base);
  for (TrainSetup& v : variants) v.offload_optimizer = *disk;
  return variants;
}

// Each strategy's setup on `first`..`last` ranks trains bit for bit as its variants.
void expect_gather_variants_alike(const optim::OptimizerOffload* disk, int first = 1,
                                  int last = 4) {
  for (int ranks = first; ranks <= last; ++ranks)
    for (TrainSetup base : one_setup_per_strategy()) {
      if (ranks == 3) base.batch_size = 12;  // divisible by 3 ranks x 2 micro-batches
      try {
        expect_bitwise_alike(ranks, base, gather_variants(base, disk));
      } catch (const std::exception& e) {
        BOOST_ERROR(e.what());
      }
    }
}
}  // namespace

BOOST_AUTO_TEST_CASE(gathering_after_the_update_changes_no_number) {
  // Note [Gathers after the update]: the next step's first units gathered as
  // soon as they are updated train bit for bit as when gathered at the next
  // step's start, for every strategy on 1-3 ranks here and on 4 in the case
  // below (gather_variants; the ThreadSanitizer stage runs that one alone).
  expect_gather_variants_alike(nullptr, 1, 3);
}

BOOST_AUTO_TEST_CASE(gathering_after_the_update_on_four_ranks_changes_no_number) {
  // The engine does gather them early: after a step the first prefetch + 1
  // stages' units are gathered, and without the setting none is.
  for (bool early : {true, false}) {
    TrainSetup s = sharded_setup(optim::ShardingStrategy::full_shard, 0, DType::bf16, 1, 2);
    s.gather_after_update = early;
    try {
      run_local_ranks(2, [&](const CommPtr& world) {
        auto trainer = tiny_trainer(world, s);
        trainer->step();
        const model_zoo::TrainingEngine& e = trainer->engine();
        for (int stage = 0; stage <= s.prefetch; ++stage) {
          const auto& h = *e.handles()[static_cast<std::size_t>(e.model().stage_unit(stage))];
          ZRT_EXPECT(h.is_unsharded() == early, "stage ", stage, "'s unit ", h.name(), " is ",
                     h.is_unsharded() ? "" : "not ", "gathered after a step with ",
                     early ? "" : "no ", "gathers after the update");
        }
      });
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
  expect_gather_variants_alike(nullptr, 4, 4);
}

BOOST_AUTO_TEST_CASE(gathering_after_the_update_with_moments_on_disk_changes_no_number) {
  // As above with AdamW's moments on disk, each variant and the setup itself.
  test::TempDir scratch;
  const optim::OptimizerOffload disk{optim::OptimizerOffload::Kind::disk, scratch.str(), 999};
  expect_gather_variants_alike(&disk);
}

BOOST_AUTO_TEST_CASE(a_link_model_changes_no_number) {
  // Note [Link model]: collectives held for a 2 Gb/s, 200 us link give the
  // bits they give at once, for every strategy on 4 ranks.
  const auto differences = differences_per_strategy(4, [](const TrainSetup& base) {
    TrainSetup held = base;
    held.link = {.gbps = 2, .latency_us = 200};
    return std::vector<TrainSetup>{held};
  });
  for (const std::string& d : differences) BOOST_ERROR(d);
  BOOST_TEST(differences.empty());
}

BOOST_AUTO_TEST_CASE(bf16_gradient_reduction_trains_close_to_fp32) {
  TrainSetup s;
  s.reduce_dtype = optim::ReduceDType::bf16;
  s.steps = 20;
  TrainOutput bf16_reduce, f32;
  run_local_ranks(4, [&](const CommPtr& world) {
    auto out = train_tiny(world, s);
    if (world->rank() == 0) bf16_reduce = out;
  });
  s.reduce_dtype = optim::ReduceDType::f32;
  run_local_ranks(4, [&](const CommPtr& world) {
    auto out = train_tiny(world, s);
    if (world->rank() == 0) f32 = out;
  });
  BOOST_TEST(bf16_reduce.losses.back() < bf16_reduce.losses.front() - 0.5);  // it learns
  double worst = 0;
  for (std::size_t i = 0; i < f32.losses.size(); ++i)
    worst = std::max(worst, std::abs(bf16_reduce.losses[i] - f32.losses[i]) / f32.losses[i]);
  BOOST_TEST(worst <= 1e-2);
  BOOST_TEST(worst > 0);  // the gradients really crossed in bf16
}

// A zero1 group of one (one rank, no-shard) reduces nothing, so a bf16 or
// fp16 reduce dtype casts nothing either: the numbers of fp32, bit for bit.
BOOST_AUTO_TEST_CASE(a_reduce_dtype_changes_nothing_where_nothing_is_reduced) {
  for (const auto& [ranks, strategy] : {std::pair{1, optim::ShardingStrategy::full_shard},
                                        std::pair{2, optim::ShardingStrategy::no_shard}})
    for (const optim::ReduceDType t : {optim::ReduceDType::bf16, optim::ReduceDType::f16}) {
      TrainSetup s;
      s.strategy = strategy;
      s.zero3_size = strategy == optim::ShardingStrategy::no_shard ? 1 : ranks;
      s.steps = 3;
      const TrainOutput f32 = train_tiny_on_local_ranks(ranks, s);
      s.reduce_dtype = t;
      const TrainOutput cast = train_tiny_on_local_ranks(ranks, s);
      BOOST_TEST(cast.losses == f32.losses, ranks << " rank(s) " << optim::strategy_name(strategy)
                                                  << " " << optim::reduce_dtype_name(t));
      BOOST_TEST((cast.params == f32.params));
    }
}

// Note [Cross-entropy normaliser]: the loss's scale is fixed in each
// micro-batch's forward. One not set (a default would train on the sum,
// scaled by the batch) or unlike the step's others is refused, naming it.
BOOST_AUTO_TEST_CASE(a_step_refuses_micro_batches_without_their_normaliser) {
  std::mt19937 gen(static_cast<std::uint32_t>(zrt::test::test_seed("normaliser")));
  model_zoo::ModelConfig m;
  m.kind = "mlp";
  m.d_in = 5;
  m.hidden = std::vector<std::int64_t>{7};
  m.n_classes = 3;
  auto batch = [&](double normaliser) {
    model_zoo::Batch b;
    b.inputs = Tensor::empty({4, 5}, DType::f32);
    for (std::int64_t i = 0; i < 20; ++i)
      b.inputs.data<float>()[i] = std::normal_distribution<float>()(gen);
    b.targets = Tensor::empty({4}, DType::i64);
    for (std::int64_t i = 0; i < 4; ++i) b.targets.data<std::int64_t>()[i] = gen() % 3;
    if (normaliser > 0) b.normaliser = normaliser;
    return b;
  };
  run_local_ranks(1, [&](const CommPtr& world) {
    model_zoo::TrainingEngine engine(model_zoo::make_model(m), world, model_zoo::EngineConfig{});
    auto refusal = [&](const std::vector<model_zoo::Batch>& micro) {
      try {
        engine.step(micro, 1e-3);
      } catch (const InvalidArgument& e) {
        return std::string(e.what());
      }
      return std::string("(trained)");
    };
    const std::string unset = refusal({batch(0)});
    ZRT_EXPECT(unset.find("micro-batch 0's Batch::normaliser is 0 (not set)") != std::string::npos,
               "an unset normaliser: '", unset, "'");
    const std::string unlike = refusal({batch(8), batch(4)});
    ZRT_EXPECT(unlike.find("micro-batch 1's Batch::normaliser 4 differs from micro-batch 0's 8") !=
                   std::string::npos,
               "unlike normalisers: '", unlike, "'");
    const model_zoo::StepStats trained = engine.step({batch(8), batch(8)}, 1e-3);
    ZRT_EXPECT(std::isfinite(trained.loss) && trained.loss > 0, "loss ", trained.loss);
  });
}

BOOST_AUTO_TEST_SUITE_END()
