// ZeroModule under mpirun: rank 0's full_param(name) beside the others'
// full_params() is one error on every rank naming both calls (Note
// [Collective contract]), not MPI_ERR_TRUNCATE or a hang.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <span>

#include "tests/optim/full_param_mismatch_check.h"
#include "tests/support/test_seed.h"
#include "zrt/runtime/comm/mpi_comm.h"

using namespace zrt;

BOOST_AUTO_TEST_SUITE(zero_module_mpi)

BOOST_AUTO_TEST_CASE(full_param_on_one_rank_is_named_on_all) {
  CommPtr world = make_mpi_world();
  world->set_timeout(std::chrono::seconds(20));  // a hang fails within the test's time
  // Rank 0's seed (printed there; ZRT_TEST_SEED replays it) on every rank.
  std::uint64_t seed =
      world->rank() == 0 ? test::test_seed("zero_module_mpi/full_param_on_one_rank") : 0;
  const auto all = world->all_gather_bytes(std::as_bytes(std::span(&seed, 1)));
  std::memcpy(&seed, all[0].data(), sizeof seed);
  try {
    testing::check_full_param_mismatch_is_named(world, seed);
  } catch (const std::exception& e) {
    BOOST_ERROR("rank " << world->rank() << ": " << e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
