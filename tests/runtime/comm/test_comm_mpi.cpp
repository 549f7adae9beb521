// The MPI backend under mpirun: every collective x dtype x size, split, ZeRO
// groups, the world from the environment, and a timeout.
#include <boost/test/unit_test.hpp>

#include <mpi.h>

#include <cstring>
#include <random>

#include "tests/runtime/comm/collective_checks.h"
#include "tests/support/test_seed.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/comm/mpi_comm.h"
#include "zrt/runtime/comm/zero_groups.h"

using namespace zrt;

namespace {

// A fresh seed, rank 0's, so every rank computes the same expected values.
std::uint64_t shared_seed(Communicator& c) {
  std::uint64_t mine = std::random_device{}() * 0x100000001ULL + std::random_device{}();
  auto all = c.all_gather_bytes(std::as_bytes(std::span(&mine, 1)));
  std::uint64_t seed = 0;
  std::memcpy(&seed, all[0].data(), sizeof seed);
  return seed;
}

// Runs `fn`, turning an exception on this rank into a test failure.
template <class F>
void checked(F&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_mpi)

BOOST_AUTO_TEST_CASE(every_collective_dtype_and_size) {
  CommPtr world = make_mpi_world();
  const std::uint64_t seed = shared_seed(*world);
  for (DType dtype : kAllDTypes)
    for (std::int64_t n : {0, 1, 7})
      checked([&] { test::check_all_collectives(*world, dtype, n, seed); });
  checked([&] {
    test::check_all_gather(*world, DType::f32, 1000003, seed);
    test::check_reduce_scatter(*world, DType::f32, 1000003 / world->size(), ReduceOp::avg, seed);
    test::check_all_reduce(*world, DType::f32, 1000003, ReduceOp::sum, seed);
  });
  checked([&] { test::check_all_gather_bytes(*world, seed); });
  checked([&] { test::check_traffic(*world); });
}

BOOST_AUTO_TEST_CASE(split_and_zero_groups) {
  CommPtr world = make_mpi_world();
  const std::uint64_t seed = shared_seed(*world);
  checked([&] { test::check_split(*world, seed); });
  for (int z = 1; z <= world->size(); ++z)
    if (world->size() % z == 0) checked([&] { test::check_zero_groups(world, z, seed); });
  if (world->size() == 4) BOOST_CHECK_THROW(make_zero_groups(world, 3), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(world_from_mpirun_environment) {
  World w = init_world();
  BOOST_CHECK(w.launch.launcher == Launcher::mpirun);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  BOOST_CHECK_EQUAL(w.comm->rank(), rank);
  BOOST_CHECK_EQUAL(w.comm->size(), size);
  BOOST_CHECK_EQUAL(std::string(w.comm->backend_name()), "mpi");
  checked([&] { test::check_all_reduce(*w.comm, DType::bf16, 7, ReduceOp::sum, 11); });
}

// Note [Collective contract], Note [Entry barrier]: each kind of mismatch is
// the same CommError on every rank, naming both sides, before MPI moves data.
BOOST_AUTO_TEST_CASE(mismatched_collectives_are_named_on_every_rank) {
  CommPtr world = make_mpi_world();
  world->set_timeout(std::chrono::seconds(20));  // a hang fails within the test's time
  // Rank 0's seed (printed there; ZRT_TEST_SEED replays it) on every rank.
  std::uint64_t seed = world->rank() == 0 ? test::test_seed("comm_mpi/mismatched_collectives") : 0;
  const auto all = world->all_gather_bytes(std::as_bytes(std::span(&seed, 1)));
  std::memcpy(&seed, all[0].data(), sizeof seed);
  for (test::Mismatch what : test::kAllMismatches)
    checked([&] {
      test::check_mismatch_is_named(*world, what, seed + static_cast<std::uint64_t>(what));
    });
}

BOOST_AUTO_TEST_CASE(rank_that_skips_a_collective_times_out_the_others) {
  CommPtr world = make_mpi_world();
  CommPtr group = world->split(0, world->rank());
  group->set_timeout(std::chrono::milliseconds(300));
  if (world->rank() != 0) {
    Tensor t = Tensor::full({3}, 1.0, DType::f32);
    try {
      group->all_reduce(t, ReduceOp::sum);
      BOOST_ERROR("all_reduce without rank 0 returned");
    } catch (const CommError& e) {
      BOOST_CHECK(std::string(e.what()).find("all_reduce #1 on group world/split(0)") !=
                  std::string::npos);
      BOOST_CHECK(std::string(e.what()).find("timed out") != std::string::npos);
    }
  }
  // The abandoned request of the broken group is never freed; the world
  // itself is still usable.
  world->barrier();
}

BOOST_AUTO_TEST_SUITE_END()
