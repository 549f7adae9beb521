// Launch-environment detection with a fake environment, and the
// single-process world.
#include <boost/test/unit_test.hpp>

#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/runtime/comm/collective_checks.h"
#include "zrt/runtime/comm/launched_world.h"

using namespace zrt;

namespace {

EnvLookup fake(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// The launcher and the place in the world detect_launch read.
void check_place(const LaunchInfo& info, Launcher launcher, int rank, int size, int local_rank,
                 int local_size) {
  BOOST_CHECK(info.launcher == launcher);
  BOOST_CHECK_EQUAL(info.rank, rank);
  BOOST_CHECK_EQUAL(info.size, size);
  BOOST_CHECK_EQUAL(info.local_rank, local_rank);
  BOOST_CHECK_EQUAL(info.local_size, local_size);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(launched_world)

BOOST_AUTO_TEST_CASE(each_launcher) {
  auto m = detect_launch(fake({{"OMPI_COMM_WORLD_RANK", "3"},
                               {"OMPI_COMM_WORLD_SIZE", "8"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                               {"RANK", "0"},
                               {"WORLD_SIZE", "2"}}));
  check_place(m, Launcher::mpirun, 3, 8, 1, 3);
  auto s = detect_launch(fake({{"SLURM_PROCID", "5"},
                               {"SLURM_NTASKS", "6"},
                               {"SLURM_LOCALID", "2"},
                               {"SLURM_NTASKS_PER_NODE", "4"}}));
  check_place(s, Launcher::slurm, 5, 6, 2, 4);
  auto t = detect_launch(fake({{"RANK", "1"},
                               {"WORLD_SIZE", "4"},
                               {"LOCAL_RANK", "1"},
                               {"MASTER_ADDR", "10.0.0.1"},
                               {"MASTER_PORT", "29500"},
                               {"LOCAL_WORLD_SIZE", "2"}}));
  check_place(t, Launcher::torchrun, 1, 4, 1, 2);
  BOOST_CHECK_EQUAL(t.master_addr, "10.0.0.1");
  BOOST_CHECK_EQUAL(t.master_port, 29500);
  auto one = detect_launch(fake({}));
  BOOST_CHECK(one.launcher == Launcher::single);
  BOOST_CHECK_EQUAL(one.size, 1);
  BOOST_CHECK_EQUAL(one.local_size, 1);
}

BOOST_AUTO_TEST_CASE(one_device_rule_for_every_launcher) {
  // torchrun's NCCL world and zrt-train's engine both place a rank by this rule.
  static_assert(device_for_local_rank(0, 8) == 0 && device_for_local_rank(5, 8) == 5);
  static_assert(device_for_local_rank(9, 8) == 1 && device_for_local_rank(3, 2) == 1);
  static_assert(device_for_local_rank(3, 0) == 0);
  BOOST_TEST(device_for_local_rank(13, 4) == 1);
}

BOOST_AUTO_TEST_CASE(bad_values_are_named) {
  BOOST_CHECK_EXCEPTION(detect_launch(fake({{"RANK", "x1"}, {"WORLD_SIZE", "2"}})), InvalidArgument,
                        [](const InvalidArgument& e) {
                          return std::string(e.what()).find("RANK='x1'") != std::string::npos;
                        });
  BOOST_CHECK_THROW(detect_launch(fake({{"RANK", "2"}, {"WORLD_SIZE", "2"}})), InvalidArgument);
  // Half of torchrun's pair: refused, naming what is missing; a harmless
  // RANK=0 or WORLD_SIZE=1 alone is one process.
  for (const auto& [vars, says] :
       std::vector<std::pair<std::map<std::string, std::string>, std::string>>{
           {{{"RANK", "1"}}, "RANK='1' is set but WORLD_SIZE is not"},
           {{{"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}}, "WORLD_SIZE='4' is set but RANK is not"}})
    BOOST_CHECK_EXCEPTION(detect_launch(fake(vars)), InvalidArgument,
                          [&](const InvalidArgument& e) {
                            return std::string(e.what()).find(says) != std::string::npos;
                          });
  BOOST_TEST(detect_launch(fake({{"RANK", "0"}})).size == 1);
  BOOST_TEST(detect_launch(fake({{"WORLD_SIZE", "1"}})).size == 1);
}

BOOST_AUTO_TEST_CASE(cuda_tensors_take_nccl_under_every_launcher) {
  LaunchInfo mpi, slurm, torch, single;
  mpi.launcher = Launcher::mpirun, mpi.size = 4;
  slurm.launcher = Launcher::slurm, slurm.size = 2;
  torch.launcher = Launcher::torchrun, torch.size = 2;
  const Device cuda = Device::cuda(0), cpu = Device::cpu();
  using T = WorldTransport;
  for (const LaunchInfo& l : {mpi, slurm}) {
    BOOST_TEST(world_uses_nccl(l, cuda, T::automatic, true));    // MPI only shares NCCL's id
    BOOST_TEST(!world_uses_nccl(l, cuda, T::automatic, false));  // no NCCL built: host-staged MPI
    BOOST_TEST(!world_uses_nccl(l, cuda, T::mpi, true));         // asked for
    BOOST_TEST(!world_uses_nccl(l, cpu, T::automatic, true));    // cpu tensors: MPI
    BOOST_TEST(world_uses_nccl(l, cuda, T::nccl, true));
  }
  BOOST_TEST(world_uses_nccl(torch, cuda, T::automatic, true));
  BOOST_TEST(!world_uses_nccl(single, cuda, T::nccl, false));  // one rank: no transport
  // A wrong choice and what this build lacks are both the user's to change:
  // InvalidArgument, a user error without a source location.
  auto refused = []<class E>(std::type_identity<E>, const std::function<void()>& f,
                             const std::string& says) {
    try {
      f();
    } catch (const E& e) {
      BOOST_TEST(std::string(e.what()).find(says) != std::string::npos, e.what());
      return;
    } catch (const std::exception& e) {
      BOOST_ERROR("refused with another error type: " << e.what());
      return;
    }
    BOOST_ERROR("not refused: " << says);
  };
  constexpr std::type_identity<InvalidArgument> wrong_choice;
  constexpr std::type_identity<InvalidArgument> not_built;
  refused(
      wrong_choice, [&] { world_uses_nccl(torch, cuda, T::mpi, true); }, "needs mpirun or srun");
  refused(
      wrong_choice, [&] { world_uses_nccl(mpi, cpu, T::nccl, true); }, "CUDA tensors only");
  // torchrun has no MPI: cpu tensors are refused before any rendezvous.
  refused(
      wrong_choice, [&] { world_uses_nccl(torch, cpu, T::automatic, true); },
      "cpu ranks launch with mpirun or srun");
  refused(
      not_built, [&] { world_uses_nccl(mpi, cuda, T::nccl, false); },
      "needs a zrt built with CUDA and NCCL");
  refused(
      not_built, [&] { world_uses_nccl(torch, cuda, T::automatic, false); },
      "launch with mpirun or srun instead");
  refused(
      wrong_choice, [&] { parse_world_transport("gloo"); }, "auto, mpi, nccl");
  BOOST_TEST((parse_world_transport("nccl") == T::nccl));
}

BOOST_AUTO_TEST_CASE(single_process_world_copies) {
  // Under ctest no launcher variables are set: a size-1 world.
  World w = init_world();
  BOOST_REQUIRE_EQUAL(w.comm->size(), 1);
  for (DType dtype : kAllDTypes)
    BOOST_CHECK_NO_THROW(test::check_all_collectives(*w.comm, dtype, 7, 99));
}

BOOST_AUTO_TEST_SUITE_END()
