// ZeroAdamW under mpirun against single-process torch.optim.AdamW: rank 0
// runs the reference once in a directory every rank reads, then each
// strategy trains on all ranks.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "tests/optim/zero_adamw_checks.h"
#include "zrt/runtime/comm/launched_world.h"

using namespace zrt;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> to_bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

std::string rank0_string(Communicator& c, const std::string& mine) {
  auto all = c.all_gather_bytes(to_bytes(mine));
  return {reinterpret_cast<const char*>(all[0].data()), all[0].size()};
}

// Runs `fn`, turning an exception on this rank into a test failure.
template <class F>
void checked(const std::string& what, F&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    BOOST_ERROR(what << ": " << e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zero_adamw_mpi)

BOOST_AUTO_TEST_CASE(matches_torch_adamw_for_each_strategy) {
  World w = init_world();
  const CommPtr& world = w.comm;
  const int n = world->size();
  // Rank 0 picks the seed and the directory, and runs the reference; the
  // gather of its status doubles as the barrier before anyone reads.
  std::string dir, status;
  std::uint64_t seed = 0;
  if (world->rank() == 0) {
    seed = std::random_device{}();
    std::string tmpl = (fs::temp_directory_path() / "zrt_zero_adamw_mpi_XXXXXX").string();
    dir = mkdtemp(tmpl.data()) ? tmpl : "";
  }
  seed = std::stoull(rank0_string(*world, std::to_string(seed)));
  dir = rank0_string(*world, dir);
  BOOST_TEST_MESSAGE("random seed " << seed);
  BOOST_REQUIRE_MESSAGE(!dir.empty(), "rank 0 could not create a temporary directory");
  const testing::AdamWScenario s = testing::make_adamw_scenario(seed);
  if (world->rank() == 0) {
    try {
      testing::run_torch_reference(s, dir);
    } catch (const std::exception& e) {
      status = e.what();
    }
  }
  status = rank0_string(*world, status);
  testing::AdamWExpected expected;
  if (status.empty())
    checked("reading the reference", [&] { expected = testing::read_torch_reference(s, dir); });
  world->barrier();
  if (world->rank() == 0) fs::remove_all(dir);
  BOOST_REQUIRE_MESSAGE(status.empty(), "reference failed on rank 0: " << status);
  BOOST_REQUIRE(!expected.norms.empty());

  const int half = std::max(1, n / 2);
  struct Case {
    optim::ShardingStrategy strategy;
    int zero3;
  };
  for (const Case& c :
       {Case{optim::ShardingStrategy::full_shard, n}, Case{optim::ShardingStrategy::no_shard, 1},
        Case{optim::ShardingStrategy::hybrid_shard, half},
        Case{optim::ShardingStrategy::layer_zero, half}})
    checked(optim::strategy_name(c.strategy),
            [&] { testing::check_zero_adamw(world, c.strategy, c.zero3, s, expected); });
  checked("skip limit",
          [&] { testing::check_skip_limit(world, optim::ShardingStrategy::full_shard, n); });
}

BOOST_AUTO_TEST_SUITE_END()
