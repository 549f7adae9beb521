// AdamW's moments on disk (Note [Optimizer state on disk]): for every
// strategy and dtype the run is bit-identical to one with the moments in
// memory, with chunks that cut handles and decay ranges anywhere; the step's
// allocator peak drops by the moments' bytes; the scratch file goes with the run.
#include <boost/test/unit_test.hpp>
#include <filesystem>

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

BOOST_AUTO_TEST_CASE(moments_on_disk_leave_the_step_peak) {
  // One rank, fp32: m and v are 8 bytes per parameter; the two chunk buffers
  // hold 4 moments × the chunk instead.
  TempDir scratch;
  auto peak = [&](OptimizerOffload offload) {
    model_zoo::TrainerConfig c;
    c.model.kind = "gpt";
    c.model.preset = "tiny";
    c.model.n_layer = 4;
    c.model.n_embd = 128;
    c.engine.offload_optimizer = offload;
    c.batch_size = 2;
    c.seq_len = 16;
    return static_cast<double>(second_step_peak(c));
  };
  const double in_memory = peak({}), on_disk = peak({OptimizerOffload::Kind::disk, scratch.str(), 4096});
  // 4 blocks of 12·128² + embeddings (256 + 64)·128: ~0.83 M parameters, 6.6 MB of moments.
  const double params = 4 * (12.0 * 128 * 128 + 13 * 128) + 320 * 128 + 2 * 128;
  BOOST_TEST_MESSAGE("step peak: moments in memory " << in_memory << " B, on disk " << on_disk << " B");
  BOOST_TEST(in_memory - on_disk > 0.9 * 8 * params);
}

BOOST_AUTO_TEST_SUITE_END()
