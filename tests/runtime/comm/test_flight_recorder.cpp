// Note [Flight recorder]: each rank's ring keeps its last collectives with
// their states; when ranks fail, the report read from their files names the
// rank that skipped, reordered or stalled, and the collective each rank is in.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "zrt/runtime/comm/flight_recorder.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace std::chrono_literals;
using zrt::test::TempDir;

namespace {

// Runs fn on `n` local ranks with a short timeout; each rank that fails
// writes its record into `dir`. Returns the report, read within a second.
std::string report_of_failed_run(int n, const std::function<void(const CommPtr&)>& fn,
                                 const TempDir& dir) {
  bool failed = false;
  try {
    run_local_ranks(
        n,
        [&](const CommPtr& world) {
          try {
            fn(world);
          } catch (const CommError&) {
            world->flight_recorder()->write(dir.str());
            throw;
          }
        },
        400ms);
  } catch (const CommError&) {
    failed = true;
  }
  BOOST_TEST(failed, "the run did not fail");
  return flight_report(dir.str(), n, 1s);
}

Tensor ones(std::int64_t n) {
  return Tensor::from_doubles(std::vector<double>(static_cast<std::size_t>(n), 1.0), DType::f32);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flight_recorder)

BOOST_AUTO_TEST_CASE(keeps_the_last_entries_with_their_states) {
  FlightRecorder r(3, 4);
  std::vector<std::uint64_t> ids;
  for (int i = 1; i <= 6; ++i)
    ids.push_back(r.issued("all_reduce", "world", static_cast<std::uint64_t>(i), 64));
  r.started(ids[4]);
  r.ended(ids[4], true);
  r.started(ids[5]);
  r.ended(ids[0], true);  // long gone from the ring: ignored
  const auto entries = r.entries();
  BOOST_TEST_REQUIRE(entries.size() == 4u);
  BOOST_TEST(entries.front().seq == 3u);
  BOOST_TEST(entries[2].state == "done");
  BOOST_TEST(entries[3].state == "running");
  BOOST_TEST(entries[0].state == "issued");
  BOOST_TEST(r.json().find("\"rank\": 3") != std::string::npos);
}

// A Caller labels the entries issued while it lives; the inner one wins and
// the outer one comes back at its end; the label is in the rank's file.
BOOST_AUTO_TEST_CASE(labels_entries_with_the_caller) {
  FlightRecorder r(0, 8);
  r.issued("barrier", "world", 1, 0);
  {
    FlightRecorder::Caller outer(r, "full_params()");
    r.issued("all_gather", "world", 2, 64);
    {
      FlightRecorder::Caller inner(r, "full_param('fc1.weight')");
      r.issued("all_gather", "world", 3, 64);
      char cut[8];
      r.copy_caller(cut);
      BOOST_TEST(std::string(cut) == "full_pa");
    }
    r.issued("all_gather", "world", 4, 64);
  }
  r.issued("barrier", "world", 5, 0);
  const auto e = r.entries();
  BOOST_TEST_REQUIRE(e.size() == 5u);
  BOOST_TEST(e[0].caller == "");
  BOOST_TEST(e[1].caller == "full_params()");
  BOOST_TEST(e[2].caller == "full_param('fc1.weight')");
  BOOST_TEST(e[3].caller == "full_params()");
  BOOST_TEST(e[4].caller == "");
  BOOST_TEST(r.json().find("\"caller\": \"full_param('fc1.weight')\"") != std::string::npos);
}

// The report of 3 ranks where rank 1 skips all-reduce #2 for a barrier;
// with `labelled`, rank 1 issues under "full_params()", the others "step()".
std::string report_of_rank_1_skipping(bool labelled) {
  TempDir dir;
  const std::string report = report_of_failed_run(
      3,
      [labelled](const CommPtr& world) {
        Tensor t = ones(5);
        world->all_reduce(t, ReduceOp::sum);
        std::optional<FlightRecorder::Caller> caller;
        if (labelled)
          caller.emplace(*world->flight_recorder(),
                         world->rank() == 1 ? "full_params()" : "step()");
        if (world->rank() != 1) world->all_reduce(t, ReduceOp::sum);  // rank 1 skips #2
        world->barrier();
      },
      dir);
  BOOST_TEST_MESSAGE(report);
  return report;
}

BOOST_AUTO_TEST_CASE(names_a_rank_that_skipped_a_collective) {
  BOOST_TEST(report_of_rank_1_skipping(false) ==
             "rank 1 is in barrier #2 on world; ranks 0, 2 are in all_reduce #2 on world");
}

// A collective issued under a caller's label is reported with it.
BOOST_AUTO_TEST_CASE(names_the_call_that_issued_each_place) {
  BOOST_TEST(report_of_rank_1_skipping(true) ==
             "rank 1 is in barrier #2 on world (full_params()); ranks 0, 2 are in all_reduce #2 "
             "on world (step())");
}

BOOST_AUTO_TEST_CASE(names_a_rank_in_another_group) {
  // The world splits into pairs; rank 3 gathers in its pair while ranks 0-2
  // all-reduce over the world.
  TempDir dir;
  const std::string report = report_of_failed_run(
      4,
      [](const CommPtr& world) {
        std::shared_ptr<Communicator> pair = world->split(world->rank() / 2, world->rank());
        Tensor t = ones(6), both = ones(12);
        if (world->rank() == 3)
          pair->all_gather_into_tensor(both, t);
        else
          world->all_reduce(t, ReduceOp::sum);
      },
      dir);
  BOOST_TEST_MESSAGE(report);
  BOOST_TEST(
      report ==
      "rank 3 is in all_gather #1 on world/split(1); ranks 0-2 are in all_reduce #2 on world");
}

BOOST_AUTO_TEST_CASE(names_a_rank_that_reordered_collectives) {
  TempDir dir;
  const std::string report = report_of_failed_run(
      3,
      [](const CommPtr& world) {
        Tensor t = ones(3), all = ones(9);
        if (world->rank() == 2) {
          world->all_gather_into_tensor(all, t);
          world->all_reduce(t, ReduceOp::sum);
        } else {
          world->all_reduce(t, ReduceOp::sum);
          world->all_gather_into_tensor(all, t);
        }
      },
      dir);
  BOOST_TEST_MESSAGE(report);
  BOOST_TEST(report ==
             "rank 2 is in all_gather #1 on world; ranks 0-1 are in all_reduce #1 on world");
}

BOOST_AUTO_TEST_CASE(names_a_rank_that_stalled) {
  TempDir dir;
  const std::string report = report_of_failed_run(
      3,
      [](const CommPtr& world) {
        Tensor t = ones(4);
        world->all_reduce(t, ReduceOp::sum);
        if (world->rank() == 2) std::this_thread::sleep_for(700ms);  // past the others' timeout
        world->all_reduce(t, ReduceOp::sum);
      },
      dir);
  BOOST_TEST_MESSAGE(report);
  BOOST_TEST(report.find("ranks 0-2 are in all_reduce #2 on world; rank 2 got there last") == 0u);
}

BOOST_AUTO_TEST_CASE(a_rank_without_a_record_is_named) {
  TempDir dir;
  FlightRecorder r0(0), r1(1);
  r0.started(r0.issued("all_reduce", "world", 1, 8));
  r1.started(r1.issued("all_reduce", "world", 1, 8));
  r0.write(dir.str());
  r1.write(dir.str());
  const auto t0 = std::chrono::steady_clock::now();
  const std::string report = flight_report(dir.str(), 3, 200ms);
  BOOST_TEST((std::chrono::steady_clock::now() - t0 < 2s));
  BOOST_TEST_MESSAGE(report);
  BOOST_TEST(report.find("ranks 0-1 are in all_reduce #1 on world") == 0u);
  BOOST_TEST(report.find("rank 2 left no record") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
