// Note [Consistency check]: ranks that agree report nothing, for every
// strategy and dtype; a replica whose master drifted between steps, and a
// zero3 shard that drifted inside a step, are named with their handle and
// rank; the trainer stops (ConsistencyError naming the step) or warns.
#include <boost/test/unit_test.hpp>

#include <random>

#include "tests/support/rank_check.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/optim/consistency_check.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace zrt::model_zoo;
using optim::ShardingStrategy;

namespace {

TrainerConfig checked_config(ShardingStrategy strategy, int zero3_size, DType dtype) {
  TrainerConfig c;
  c.model.kind = "gpt";
  c.model.preset = "tiny";
  c.engine.zero.strategy = strategy;
  c.engine.zero.zero3_size = zero3_size;
  c.engine.zero.dtype = dtype;
  c.batch_size = 12;
  c.seq_len = 16;
  c.steps = 3;
  c.check_consistency_every = 1;
  return c;
}

// Trains `c` on `world` local ranks; after the first step, `corrupt` (if
// any) runs on every rank's trainer. Returns the first error's message
// ("" when none) and rank 0's findings of each step.
std::string train(const TrainerConfig& c, int world,
                  const std::function<void(Trainer&, int)>& corrupt,
                  std::vector<std::vector<std::string>>* findings = nullptr) {
  try {
    run_local_ranks(
        world,
        [&](const CommPtr& comm) {
          Trainer trainer(comm, c, synthetic_text_dataset());
          for (std::int64_t s = 0; s < c.steps; ++s) {
            StepReport r = trainer.step();
            if (findings && comm->rank() == 0) findings->push_back(r.stats.inconsistencies);
            if (s == 0 && corrupt) corrupt(trainer, comm->rank());
          }
        },
        std::chrono::seconds(60));
  } catch (const ConsistencyError& e) {
    return e.what();
  }
  return "";
}

// Adds 1 to the first element of handle k's fp32 master on `rank`.
std::function<void(Trainer&, int)> bump_master(std::size_t k, int rank) {
  return [=](Trainer& t, int r) {
    if (r != rank) return;
    t.engine().module().synchronize();
    t.engine().handles().at(k)->zero1_shard().data<float>()[0] += 1.0f;
  };
}

}  // namespace

BOOST_AUTO_TEST_SUITE(consistency_check)

BOOST_AUTO_TEST_CASE(agreeing_ranks_report_nothing) {
  struct Case {
    ShardingStrategy strategy;
    int world, zero3;
    DType dtype;
  };
  for (const Case& k : {Case{ShardingStrategy::full_shard, 2, 0, DType::bf16},
                        Case{ShardingStrategy::shard_grad_op, 3, 0, DType::f16},
                        Case{ShardingStrategy::no_shard, 3, 0, DType::bf16},
                        Case{ShardingStrategy::hybrid_shard, 4, 2, DType::f32},
                        Case{ShardingStrategy::hybrid_shard, 4, 2, DType::bf16},
                        Case{ShardingStrategy::layer_zero, 4, 2, DType::bf16}}) {
    std::vector<std::vector<std::string>> findings;
    const std::string error =
        train(checked_config(k.strategy, k.zero3, k.dtype), k.world, {}, &findings);
    BOOST_TEST(error.empty(), optim::strategy_name(k.strategy) << ": " << error);
    BOOST_TEST(findings.size() == 3u);
    for (const auto& f : findings) BOOST_TEST(f.empty());
  }
}

BOOST_AUTO_TEST_CASE(a_drifted_replica_is_named_with_its_step) {
  // Hybrid, 4 ranks in zero3 groups {0, 1} and {2, 3}: rank 1's replica is
  // rank 3. With two replicas neither is the majority: both are named.
  std::string error =
      train(checked_config(ShardingStrategy::hybrid_shard, 2, DType::f32), 4, bump_master(1, 1));
  BOOST_TEST_MESSAGE(error);
  BOOST_TEST(
      error.find(
          "step 1: ranks that must hold equal data do not (the step's update was not applied)") !=
      std::string::npos);
  BOOST_TEST(error.find("handle 'h.0': the fp32 master of rank(s) 1, 3 differ among themselves") !=
             std::string::npos);
  // No-shard on 3 ranks: the two that agree outvote rank 1.
  error = train(checked_config(ShardingStrategy::no_shard, 0, DType::bf16), 3, bump_master(2, 1));
  BOOST_TEST_MESSAGE(error);
  BOOST_TEST(error.find("handle 'h.1': the fp32 master of rank(s) 1 differs from its replica(s) on "
                        "rank(s) 0, 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_withheld_step_trains_again_once_repaired) {
  // The withheld step's gradients are dropped: once the drifted master is
  // put back, the step trains as in a run that never drifted, also with the
  // LM head tied across units (its owner synced before the check).
  for (const bool head_unit : {false, true}) {
    TrainerConfig c = checked_config(ShardingStrategy::hybrid_shard, 2, DType::f32);
    c.model.head_unit = head_unit;
    std::vector<double> clean, repaired(3, 0.0);
    run_local_ranks(
        4,
        [&](const CommPtr& comm) {
          Trainer trainer(comm, c, synthetic_text_dataset());
          std::vector<double> losses;
          for (int s = 0; s < 3; ++s) losses.push_back(trainer.step().stats.loss);
          if (comm->rank() == 0) clean = losses;
        },
        std::chrono::seconds(60));
    std::vector<std::string> errors(4);
    run_local_ranks(
        4,
        [&](const CommPtr& comm) {
          const int rank = comm->rank();
          Trainer trainer(comm, c, synthetic_text_dataset());
          std::vector<double> losses{trainer.step().stats.loss};
          trainer.engine().module().synchronize();
          float& first = trainer.engine().handles().at(1)->zero1_shard().data<float>()[0];
          const float kept = first;
          if (rank == 1) first += 1.0f;
          try {
            trainer.step();
          } catch (const ConsistencyError& e) {
            errors[static_cast<std::size_t>(rank)] = e.what();
          }
          first = kept;
          for (int s = 1; s < 3; ++s) losses.push_back(trainer.step().stats.loss);
          if (rank == 0) repaired = losses;
        },
        std::chrono::seconds(60));
    for (const std::string& e : errors) BOOST_TEST(e.find("step 1:") != std::string::npos, e);
    BOOST_TEST(repaired == clean, "head_unit " << head_unit);
  }
}

BOOST_AUTO_TEST_CASE(warn_only_reports_and_trains_on) {
  TrainerConfig c = checked_config(ShardingStrategy::no_shard, 0, DType::f32);
  c.consistency_warn_only = true;
  std::vector<std::vector<std::string>> findings;
  BOOST_TEST(train(c, 2, bump_master(0, 1), &findings).empty());
  BOOST_TEST_REQUIRE(findings.size() == 3u);
  BOOST_TEST(findings[0].empty());
  BOOST_TEST(findings[1].size() == 1u);  // the masters stay apart: every later check says so
  BOOST_TEST(findings[2].size() == 1u);
  c.check_consistency_every = -1;
  BOOST_CHECK_THROW(train(c, 1, {}), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(a_drifted_zero3_shard_is_named) {
  // Layer-zero on 4 ranks, zero3 groups of 2, bf16: after a forward each
  // rank's zero3 shard is current; rank 2's is then corrupted. Also with an
  // int8 gather, whose zero3 shards are quantized chunks (Note [Quantized
  // parameter gather]).
  for (const optim::GatherDType gather : {optim::GatherDType::compute, optim::GatherDType::int8}) {
    BOOST_TEST_CONTEXT("gather " << optim::gather_dtype_name(gather)) {
      const auto seed = test::test_seed("consistency_check/a_drifted_zero3_shard_is_named");
      std::vector<std::string> clean, corrupted;
      run_local_ranks(4, [&](const CommPtr& world) {
        std::mt19937 rng(static_cast<std::uint32_t>(seed));  // the same values on every rank
        std::normal_distribution<double> normal;
        std::vector<double> w(37 * 3), b(3);
        for (auto& x : w) x = normal(rng);
        for (auto& x : b) x = normal(rng);
        optim::ZeroModuleOptions o;
        o.strategy = ShardingStrategy::layer_zero;
        o.zero3_size = 2;
        o.dtype = DType::bf16;
        o.gather.dtype = gather;
        optim::ZeroModule module(world, o);
        const auto unit = module.add_unit(
            "fc", {{"weight", Tensor::from_doubles(w, DType::f32, Device::cpu(), {37, 3})},
                   {"bias", Tensor::from_doubles(b, DType::f32)}});
        module.forward(unit).close();
        const auto before = optim::check_consistency(module);
        if (world->rank() == 2) {
          module.synchronize();
          const Tensor& z3 = module.handle(unit).zero3_shard();
          ZRT_EXPECT((z3.dtype() == DType::u8) == (gather == optim::GatherDType::int8),
                     "zero3 dtype");
          static_cast<std::uint8_t*>(z3.data_ptr())[11] ^= 0x40;  // an int8 value, or a bf16 byte
        }
        const auto after = optim::check_consistency(module);
        if (world->rank() == 0) {
          clean = before;
          corrupted = after;
        }
        const auto again = optim::check_consistency(module);
        ZRT_EXPECT(again == after, "the findings of a second check differ");
      });
      BOOST_TEST(clean.empty());
      BOOST_TEST_REQUIRE(corrupted.size() == 1u);
      BOOST_TEST(
          corrupted[0] ==
          "handle 'fc': the zero3 shard of rank 2 differs from the cast of the zero1 masters it "
          "was cut from");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
