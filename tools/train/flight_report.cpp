#include "tools/train/flight_report.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "tools/common/report_error.h"

namespace zrt::train {

namespace {

// The directory a process of local ranks uses when no other is named.
std::string process_flight_dir() {
  return (std::filesystem::temp_directory_path() /
          ("zrt-flight-recorder." + std::to_string(::getpid())))
      .string();
}

}  // namespace

std::string flight_record_dir(const TrainOptions& o) {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("ZRT_FLIGHT_RECORDER_DIR"); env != nullptr && *env != '\0')
    return env;
  if (!o.trace.empty()) {
    const fs::path parent = fs::path(o.trace).parent_path();
    return parent.empty() ? "." : parent.string();
  }
  if (o.ranks > 0) return process_flight_dir();
  return "";
}

void forget_flight_record(const TrainOptions& o, int rank) noexcept {
  try {
    const std::string dir = flight_record_dir(o);
    std::error_code ignored;
    if (!dir.empty())
      std::filesystem::remove(
          std::filesystem::path(dir) / ("flight-rank-" + std::to_string(rank) + ".json"), ignored);
  } catch (const std::exception&) {
  }
}

void report_flight(const Communicator& world, const TrainOptions& o, std::mutex& io,
                   bool job_ends_after) noexcept {
  try {
    const std::string dir = flight_record_dir(o);
    const auto& recorder = world.flight_recorder();
    if (dir.empty()) {
      const std::string here = flight_report({recorder->entries()}, {true});
      std::lock_guard lock(io);
      std::fprintf(stderr,
                   "zrt-train: flight recorder: rank %d %s (set ZRT_FLIGHT_RECORDER_DIR to a "
                   "directory every "
                   "rank sees for the report of all ranks)\n",
                   world.rank(), here.substr(here.find(" is ") + 1).c_str());
      return;
    }
    std::filesystem::create_directories(dir);
    const std::string path = recorder->write(dir);
    // Note [Flight report before the job ends]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    // Under mpirun the first rank to end the job (abort_mpi_job) ends every
    // rank at once, rank 0 in the middle of its report too: with three ranks
    // or more the rank that stopped was then named nowhere. So the other
    // ranks first give rank 0 the time its report takes (its wait for the
    // records, and a margin). One still running after that means rank 0
    // did not end the job: it is the rank that stopped, or it failed later
    // than this one. Rank 1 then reports in its place from the records
    // there are, rank 2 a second later, and so on.
    constexpr auto kRecordWait = std::chrono::seconds(5);
    auto wait = kRecordWait;
    if (world.rank() != 0) {
      if (!job_ends_after) return;
      std::this_thread::sleep_for(kRecordWait +
                                  std::chrono::seconds(2 + std::min(world.rank(), 8)));
      wait = std::chrono::seconds(0);
    }
    const std::string report = flight_report(dir, world.size(), wait);
    // This process's own directory goes once its ranks have ended
    // (remove_process_flight_dir): the report names no files there.
    const std::string where =
        dir == process_flight_dir() ? std::string() : " (rank files in " + dir + ")";
    std::lock_guard lock(io);
    std::fprintf(stderr, "zrt-train: flight recorder%s: %s\n", where.c_str(), report.c_str());
  } catch (const std::exception& e) {
    std::lock_guard lock(io);
    std::fprintf(stderr, "zrt-train: flight recorder: rank %d could not write its record: %s\n",
                 world.rank(), tools::error_text(e).c_str());
  }
}

void remove_process_flight_dir(const TrainOptions& o) noexcept {
  try {
    if (flight_record_dir(o) != process_flight_dir()) return;
    std::error_code ignored;
    std::filesystem::remove_all(process_flight_dir(), ignored);
  } catch (const std::exception&) {
  }
}

}  // namespace zrt::train
