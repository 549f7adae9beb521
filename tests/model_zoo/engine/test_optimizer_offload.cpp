// AdamW's moments on disk (Note [Optimizer state on disk]): for every
// strategy and dtype the run is bit-identical to one with the moments in
// memory, with chunks that cut handles and decay ranges anywhere; the step's
// allocator peak drops by the moments' bytes; the scratch file goes with the run.
#include <boost/test/unit_test.hpp>
#include <filesystem>

#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/runtime/comm/local_comm.h"
#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/optim/checkpoint/checkpoint_test_files.h"

using namespace zrt;
using namespace zrt::testing;
using optim::OptimizerOffload;
using zrt::test::TempDir;

namespace {

std::size_t open_file_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizer_offload)

BOOST_AUTO_TEST_CASE(moments_on_disk_change_no_number) {
  struct Case {
    std::string model;
    optim::ShardingStrategy strategy;
    int zero3;
    DType dtype;
  };
  const Case cases[] = {
      {"gpt", optim::ShardingStrategy::full_shard, 0, DType::f32},
      {"gpt", optim::ShardingStrategy::shard_grad_op, 0, DType::bf16},
      {"gpt", optim::ShardingStrategy::no_shard, 0, DType::f16},
      {"gpt", optim::ShardingStrategy::hybrid_shard, 1, DType::f32},
      {"gpt", optim::ShardingStrategy::layer_zero, 1, DType::bf16},
      {"mlp", optim::ShardingStrategy::full_shard, 0, DType::f32},
  };
  TempDir scratch;
  const std::size_t open_files = open_file_count();
  std::size_t alike = 0;
  for (const Case& c : cases) {
    TrainSetup base;
    base.model = c.model;
    base.strategy = c.strategy;
    base.zero3_size = c.zero3;
    base.dtype = c.dtype;
    base.micro_batches = 2;
    base.steps = 4;
    std::vector<TrainSetup> variants(2, base);
    // 999 and 4097 elements: chunks end inside parameters and decay ranges.
    variants[0].offload_optimizer = {OptimizerOffload::Kind::disk, scratch.str(), 999};
    variants[1].offload_optimizer = {OptimizerOffload::Kind::disk, scratch.str(), 4097};
    try {
      expect_bitwise_alike(2, base, variants);
      ++alike;
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
  BOOST_TEST(alike == std::size(cases));
  // Note [Scratch files]: unlinked at once, and closed (its space freed) with the run.
  BOOST_TEST(std::filesystem::is_empty(scratch.path));
  BOOST_TEST(open_file_count() == open_files);
}

BOOST_AUTO_TEST_CASE(moments_on_disk_leave_the_step_peak) {
  // One rank, fp32: m and v are 8 bytes per parameter; the two chunk buffers
  // hold 4 moments × the chunk instead.
  TempDir scratch;
  auto peak = [&](OptimizerOffload offload) {
    std::size_t out = 0;
    run_local_ranks(1, [&](const CommPtr& world) {
      model_zoo::TrainerConfig c;
      c.model.kind = "gpt";
      c.model.preset = "tiny";
      c.model.n_layer = 4;
      c.model.n_embd = 128;
      c.engine.offload_optimizer = offload;
      c.batch_size = 2;
      c.seq_len = 16;
      c.steps = 2;
      model_zoo::Trainer trainer(world, c, model_zoo::synthetic_text_dataset());
      trainer.step();
      out = trainer.step().memory.peak_allocated;
    });
    return static_cast<double>(out);
  };
  const double in_memory = peak({}), on_disk = peak({OptimizerOffload::Kind::disk, scratch.str(), 4096});
  // 4 blocks of 12·128² + embeddings (256 + 64)·128: ~0.83 M parameters, 6.6 MB of moments.
  const double params = 4 * (12.0 * 128 * 128 + 13 * 128) + 320 * 128 + 2 * 128;
  BOOST_TEST_MESSAGE("step peak: moments in memory " << in_memory << " B, on disk " << on_disk << " B");
  BOOST_TEST(in_memory - on_disk > 0.9 * 8 * params);
}

BOOST_AUTO_TEST_SUITE_END()
