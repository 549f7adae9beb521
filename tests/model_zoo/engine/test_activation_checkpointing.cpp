// Activation checkpointing (Note [Activation checkpointing]): recomputing a
// block's forward in backward changes no number, for every strategy, dtype
// and micro-batch count, and it lowers the step's allocator peak.
#include <boost/test/unit_test.hpp>

#include "tests/model_zoo/engine/engine_checks.h"

using namespace zrt;
using namespace zrt::testing;
using model_zoo::ActivationCheckpointing;
using model_zoo::parse_activation_checkpointing;

namespace {

// Allocator peak of the second step of a GPT whose activations outweigh its
// parameters (8 blocks of width 64, 32 × 32 tokens), on one rank.
std::size_t step_peak(ActivationCheckpointing checkpointing, optim::CpuStreams streams) {
  model_zoo::TrainerConfig c;
  c.model.kind = "gpt";
  c.model.preset = "tiny";
  c.model.n_layer = 8;
  c.model.n_embd = 64;
  c.engine.checkpointing = checkpointing;
  c.engine.zero.cpu_streams = streams;
  c.batch_size = 32;
  c.seq_len = 32;
  return second_step_peak(c);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(activation_checkpointing)

BOOST_AUTO_TEST_CASE(names_parse_and_bad_ones_are_refused) {
  BOOST_TEST(parse_activation_checkpointing("none").every == 0);
  BOOST_TEST(parse_activation_checkpointing("blocks").every == 1);
  BOOST_TEST(parse_activation_checkpointing("every:3").every == 3);
  BOOST_TEST(parse_activation_checkpointing("every:3").str() == "every:3");
  BOOST_TEST(parse_activation_checkpointing("every:1").str() == "blocks");
  for (const char* bad :
       {"", "all", "every:", "every:0", "every:-2", "every:2x", "every:99999999999"})
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
  const auto differences = differences_per_strategy(2, [](const TrainSetup& base) {
    std::vector<TrainSetup> variants(3, base);
    variants[0].checkpointing = {1};
    variants[1].checkpointing = {2};
    variants[2].checkpointing = {1};
    variants[2].prefetch = 2;  // recomputation with the previous stages' units already gathering
    return variants;
  });
  for (const std::string& d : differences) BOOST_ERROR(d);
  BOOST_TEST(differences.empty());
}

BOOST_AUTO_TEST_CASE(checkpointing_lowers_the_step_peak) {
  // A block keeps ~16 [B, T, C] tensors for its backward; checkpointed, one.
  // With the compute on a CPU stream of its own too, whose queued tasks hold
  // what the host freed (Note [Allocations wait for their stream's frees]).
  for (optim::CpuStreams streams :
       {optim::CpuStreams::none, optim::CpuStreams::comm, optim::CpuStreams::all}) {
    const std::size_t none = step_peak({0}, streams), every2 = step_peak({2}, streams),
                      blocks = step_peak({1}, streams);
    const std::string mode = optim::cpu_streams_name(streams);
    BOOST_TEST_MESSAGE("--cpu-streams " << mode << ": step peak: none " << none << " B, every:2 "
                                        << every2 << " B, blocks " << blocks << " B");
    BOOST_TEST(every2 < none, mode);
    BOOST_TEST(blocks < every2, mode);
    // 8 blocks of caches down to 8 inputs plus one block's caches: well under half.
    BOOST_TEST(static_cast<double>(blocks) < 0.5 * static_cast<double>(none), mode);
  }
}

BOOST_AUTO_TEST_SUITE_END()
