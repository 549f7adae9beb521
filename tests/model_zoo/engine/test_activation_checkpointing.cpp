// Activation checkpointing (Note [Activation checkpointing]): recomputing a
// block's forward in backward changes no number, for every strategy, dtype
// and micro-batch count, and it lowers the step's allocator peak.
#include <boost/test/unit_test.hpp>

#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/runtime/comm/local_comm.h"
#include "tests/model_zoo/engine/engine_checks.h"

using namespace zrt;
using namespace zrt::testing;
using model_zoo::ActivationCheckpointing;
using model_zoo::parse_activation_checkpointing;

namespace {

// Allocator peak of the second step of a GPT whose activations outweigh its
// parameters (8 blocks of width 64, 32 × 32 tokens), on one rank.
std::size_t step_peak(ActivationCheckpointing checkpointing) {
  std::size_t peak = 0;
  run_local_ranks(1, [&](const CommPtr& world) {
    model_zoo::TrainerConfig c;
    c.model.kind = "gpt";
    c.model.preset = "tiny";
    c.model.n_layer = 8;
    c.model.n_embd = 64;
    c.engine.checkpointing = checkpointing;
    c.batch_size = 32;
    c.seq_len = 32;
    c.steps = 2;
    model_zoo::Trainer trainer(world, c, model_zoo::synthetic_text_dataset());
    trainer.step();
    peak = trainer.step().memory.peak_allocated;
  });
  return peak;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(activation_checkpointing)

BOOST_AUTO_TEST_CASE(names_parse_and_bad_ones_are_refused) {
  BOOST_TEST(parse_activation_checkpointing("none").every == 0);
  BOOST_TEST(parse_activation_checkpointing("blocks").every == 1);
  BOOST_TEST(parse_activation_checkpointing("every:3").every == 3);
  BOOST_TEST(parse_activation_checkpointing("every:3").str() == "every:3");
  BOOST_TEST(parse_activation_checkpointing("every:1").str() == "blocks");
  for (const char* bad : {"", "all", "every:", "every:0", "every:-2", "every:2x", "every:99999999999"})
    BOOST_CHECK_THROW(parse_activation_checkpointing(bad), InvalidArgument);
  const ActivationCheckpointing every2{2};
  BOOST_TEST(every2.checkpoints(0));
  BOOST_TEST(!every2.checkpoints(1));
  BOOST_TEST(every2.checkpoints(4));
  BOOST_TEST(!ActivationCheckpointing{}.checkpoints(0));
}

BOOST_AUTO_TEST_CASE(recomputing_blocks_changes_no_number) {
  // Each strategy with another dtype and micro-batch count, on 2 ranks; the
  // tiny GPT has 2 blocks (every:2 checkpoints h.0 only), the tiny MLP one.
  struct Case {
    std::string model;
    optim::ShardingStrategy strategy;
    int zero3;
    DType dtype;
    int micro;
  };
  const Case cases[] = {
      {"gpt", optim::ShardingStrategy::full_shard, 0, DType::f32, 2},
      {"gpt", optim::ShardingStrategy::shard_grad_op, 0, DType::bf16, 1},
      {"gpt", optim::ShardingStrategy::no_shard, 0, DType::f16, 2},
      {"gpt", optim::ShardingStrategy::hybrid_shard, 1, DType::f32, 1},
      {"gpt", optim::ShardingStrategy::layer_zero, 1, DType::bf16, 2},
      {"mlp", optim::ShardingStrategy::full_shard, 0, DType::f32, 2},
  };
  std::size_t alike = 0;
  for (const Case& c : cases) {
    TrainSetup base;
    base.model = c.model;
    base.strategy = c.strategy;
    base.zero3_size = c.zero3;
    base.dtype = c.dtype;
    base.micro_batches = c.micro;
    base.steps = 4;
    std::vector<TrainSetup> variants(3, base);
    variants[0].checkpointing = {1};
    variants[1].checkpointing = {2};
    variants[2].checkpointing = {1};
    variants[2].prefetch = 2;  // recomputation with the previous stages' units already gathering
    try {
      expect_bitwise_alike(2, base, variants);
      ++alike;
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
  BOOST_TEST(alike == std::size(cases));
}

BOOST_AUTO_TEST_CASE(checkpointing_lowers_the_step_peak) {
  // A block keeps ~16 [B, T, C] tensors for its backward; checkpointed, one.
  const std::size_t none = step_peak({0}), every2 = step_peak({2}), blocks = step_peak({1});
  BOOST_TEST_MESSAGE("step peak: none " << none << " B, every:2 " << every2 << " B, blocks " << blocks << " B");
  BOOST_TEST(every2 < none);
  BOOST_TEST(blocks < every2);
  // 8 blocks of caches down to 8 inputs plus one block's caches: well under half.
  BOOST_TEST(static_cast<double>(blocks) < 0.5 * static_cast<double>(none));
}

BOOST_AUTO_TEST_SUITE_END()
