// AdamW's moments on disk (Note [Optimizer state on disk]): for every
// strategy and dtype the run is bit-identical to one with the moments in
// memory, with chunks that cut handles and decay ranges anywhere; the step's
// allocator peak drops by the moments' bytes; the scratch file goes with the run.
// The master and moments in host memory (Note [Master in host memory]): the
// same path a CUDA run takes, on CPU ranks whose host memory is outside the
// caching allocator; bit-identical for every strategy, and the device peak
// drops by the master's and moments' bytes.
#include <boost/test/unit_test.hpp>
#include <filesystem>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "zrt/optim/zero_adamw.h"
#include "zrt/runtime/comm/local_comm.h"

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

// The second step's allocator peak of a 4-layer, 128-wide tiny GPT whose
// zero3 shards are `dtype`, its optimizer state offloaded as `offload`.
double step_peak(DType dtype, const OptimizerOffload& offload) {
  model_zoo::TrainerConfig c;
  c.model.kind = "gpt";
  c.model.preset = "tiny";
  c.model.n_layer = 4;
  c.model.n_embd = 128;
  c.engine.zero.dtype = dtype;
  c.engine.zero.offload_optimizer = offload;
  c.batch_size = 2;
  c.seq_len = 16;
  return static_cast<double>(second_step_peak(c));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizer_offload)

BOOST_AUTO_TEST_CASE(moments_on_disk_change_no_number) {
  TempDir scratch;
  const std::size_t open_files = open_file_count();
  const auto differences = differences_per_strategy(2, [&](const TrainSetup& base) {
    std::vector<TrainSetup> variants(2, base);
    // 999 and 4097 elements: chunks end inside parameters and decay ranges.
    variants[0].offload_optimizer = {OptimizerOffload::Kind::disk, scratch.str(), 999};
    variants[1].offload_optimizer = {OptimizerOffload::Kind::disk, scratch.str(), 4097};
    return variants;
  });
  for (const std::string& d : differences) BOOST_ERROR(d);
  BOOST_TEST(differences.empty());
  // Note [Scratch files]: unlinked at once, and closed (its space freed) with the run.
  BOOST_TEST(std::filesystem::is_empty(scratch.path));
  BOOST_TEST(open_file_count() == open_files);
}

BOOST_AUTO_TEST_CASE(bf16_moments_offloaded_change_no_number) {
  // Note [bf16 AdamW moments]: on disk (chunks that cut parameters carry
  // their flat index) and in host memory, bf16 moments train bit for bit as
  // in memory.
  TempDir scratch;
  TrainSetup base;
  base.optimizer_state_dtype = DType::bf16;
  base.steps = 4;
  std::vector<TrainSetup> variants(2, base);
  variants[0].offload_optimizer = {OptimizerOffload::Kind::disk, scratch.str(), 999};
  variants[1].offload_optimizer.kind = OptimizerOffload::Kind::host;
  try {
    expect_bitwise_alike(2, base, variants);
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

BOOST_AUTO_TEST_CASE(moments_on_disk_leave_the_step_peak) {
  // One rank, fp32: m and v are 8 bytes per parameter; the two chunk buffers
  // hold 4 moments × the chunk instead.
  TempDir scratch;
  auto peak = [&](OptimizerOffload offload) { return step_peak(DType::f32, offload); };
  const double in_memory = peak({}),
               on_disk = peak({OptimizerOffload::Kind::disk, scratch.str(), 4096});
  // 4 blocks of 12·128² + embeddings (256 + 64)·128: ~0.83 M parameters, 6.6 MB of moments.
  const double params = 4 * (12.0 * 128 * 128 + 13 * 128) + 320 * 128 + 2 * 128;
  BOOST_TEST_MESSAGE("step peak: moments in memory " << in_memory << " B, on disk " << on_disk
                                                     << " B");
  BOOST_TEST(in_memory - on_disk > 0.9 * 8 * params);
}

BOOST_AUTO_TEST_CASE(master_in_host_memory_changes_no_number) {
  OptimizerOffload host;
  host.kind = OptimizerOffload::Kind::host;
  // Every strategy and dtype on 2 ranks: alone, with offloaded gradients, and
  // with every CPU stream (the copies down and up run on the comm stream).
  const auto differences = differences_per_strategy(2, [&](const TrainSetup& base) {
    std::vector<TrainSetup> variants(3, base);
    for (TrainSetup& v : variants) v.offload_optimizer = host;
    variants[1].offload_grads = true;
    variants[2].cpu_streams = optim::CpuStreams::all;
    variants[2].prefetch = 2;
    return variants;
  });
  for (const std::string& d : differences) BOOST_ERROR(d);
  BOOST_TEST(differences.empty());
  // A world of one in fp32, where the unsharded parameter and the gradient
  // shard are otherwise the master's memory; 3 ranks with uneven shards and
  // a zero3 group of one per node (hybrid) in bf16.
  TrainSetup one;
  one.steps = 4;
  TrainSetup three;
  three.steps = 4;
  three.strategy = optim::ShardingStrategy::hybrid_shard;
  three.zero3_size = 1;
  three.dtype = DType::bf16;
  three.batch_size = 18;
  for (auto [ranks, base] : {std::pair{1, one}, std::pair{3, three}}) {
    TrainSetup v = base;
    v.offload_optimizer = host;
    BOOST_CHECK_NO_THROW(expect_bitwise_alike(ranks, base, {v}));
  }
}

BOOST_AUTO_TEST_CASE(master_in_host_memory_leaves_the_device_peak) {
  // One rank, bf16: the fp32 master, m and v (12 bytes per parameter) leave
  // the caching allocator; the bf16 zero3 shard and the fp32 gradient shard stay.
  auto peak = [&](OptimizerOffload offload) { return step_peak(DType::bf16, offload); };
  OptimizerOffload host;
  host.kind = OptimizerOffload::Kind::host;
  const double on_device = peak({}), on_host = peak(host);
  const double params = 4 * (12.0 * 128 * 128 + 13 * 128) + 320 * 128 + 2 * 128;
  BOOST_TEST_MESSAGE("step peak: master and moments with the parameters "
                     << on_device << " B, in host memory " << on_host << " B");
  BOOST_TEST(on_device - on_host > 0.9 * 12 * params);
}

BOOST_AUTO_TEST_CASE(host_offload_needs_handles_with_the_master_in_host_memory) {
  // ZeroAdamW on handles built otherwise is refused, naming the option.
  run_local_ranks(1, [](const CommPtr& world) {
    optim::FlatParamOptions o;
    o.name = "unit";
    optim::FlatParamHandle h({{"", "w", Tensor::full({5}, 1.0, DType::f32)}},
                             make_zero_groups(world, 1), o);
    OptimizerOffload host;
    host.kind = OptimizerOffload::Kind::host;
    BOOST_CHECK_EXCEPTION(
        optim::ZeroAdamW({&h}, {}, host), InvalidArgument, [](const InvalidArgument& e) {
          return std::string(e.what()).find("master_on_host") != std::string::npos;
        });
  });
}

BOOST_AUTO_TEST_SUITE_END()
