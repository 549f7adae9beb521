#include "tools/train/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/path_overlap.h"

namespace zrt::train {

namespace fs = std::filesystem;

namespace {

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string list_steps(const std::vector<std::int64_t>& steps) {
  std::string out;
  for (std::size_t i = 0; i < steps.size() && i < 8; ++i)
    out += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > 8) out += ", ... (" + std::to_string(steps.size()) + " in all)";
  return out;
}

}  // namespace

void check_continues_checkpoint_dir(const std::string& dir, bool resume,
                                    const std::string& resume_from) {
  const std::vector<std::int64_t> steps = optim::complete_steps(dir);
  if (steps.empty()) return;
  if (!resume_from.empty()) {
    // A rollback to one of DIR's own steps, or a copy of the run resumed into
    // it, sets the newer steps aside; steps of another run would be set aside
    // or pruned as if they were this one's.
    if (path_is_within(resume_from, dir)) return;
    std::string ours, theirs;
    try {
      ours = optim::run_identity(optim::CheckpointReader(resume_from).index());
      theirs = optim::run_identity(
          optim::CheckpointReader((fs::path(dir) / optim::step_dir_name(steps.back())).string())
              .index());
    } catch (const CheckpointError&) {
      return;  // an unreadable --resume is named when it is loaded
    }
    ZRT_CHECK_ARG(ours == theirs, "--checkpoint-dir ", dir, " holds steps ", list_steps(steps),
                  " of another run (another model or --seed) than --resume ", resume_from,
                  ": continuing there would set those steps aside or prune them (--keep-last); "
                  "name an empty --checkpoint-dir, or continue its own run with --resume alone");
    return;
  }
  ZRT_CHECK_ARG(
      resume, "--checkpoint-dir ", dir, " already holds steps ", list_steps(steps),
      " of a run; add --resume to continue it (or name another directory): starting over would "
      "overwrite them");
  if (fs::exists(fs::path(dir) / "latest")) return;
  // The advice names a step that is a checkpoint (an emptied step-N is not).
  const std::vector<std::int64_t> checkpoints = optim::indexed_steps(dir);
  ZRT_CHECK_ARG(!checkpoints.empty(), "--checkpoint-dir ", dir, " holds step directories ",
                list_steps(steps),
                " but none is a checkpoint (no index.json) and no `latest` names one: move "
                "them out of the way, or name another --checkpoint-dir");
  ZRT_THROW(InvalidArgument, "--checkpoint-dir ", dir, " holds steps ", list_steps(steps),
            " but no `latest` naming one; resume one of them with --resume ", dir, "/",
            optim::step_dir_name(checkpoints.back()), " (starting at step 0 would overwrite them)");
}

std::vector<std::int64_t> set_aside_newer_steps(const std::string& dir, std::int64_t step,
                                                bool including_step) {
  std::vector<std::int64_t> newer;
  std::int64_t keep = -1;  // the newest step left
  // Checkpoints only: a step-N without an index is a user's, left where it is.
  for (std::int64_t s : optim::indexed_steps(dir)) {
    if (s > step || (including_step && s == step))
      newer.push_back(s);
    else
      keep = s;
  }
  if (newer.empty()) return newer;
  // A directory of its own, made before anything moves: two rollbacks to
  // the same step within a second (a requeued job) get two.
  const std::string stem =
      "abandoned-from-" + std::to_string(step) + "-" + std::to_string(unix_seconds());
  fs::path aside = fs::path(dir) / stem;
  for (int n = 2; !fs::create_directory(aside); ++n)
    aside = fs::path(dir) / (stem + "-" + std::to_string(n));
  // `latest` next: it must never name a step that is being moved.
  if (keep >= 0) {
    optim::publish_latest(dir, keep);
  } else {
    std::error_code ec;
    fs::remove(fs::path(dir) / "latest", ec);
  }
  for (std::int64_t s : newer) {
    std::error_code ec;
    fs::rename(fs::path(dir) / optim::step_dir_name(s), aside / optim::step_dir_name(s), ec);
    ZRT_CHECK_AS(ResourceError, !ec, "cannot move step ", s, " of ", dir, " aside into ",
                 aside.string(), ": ", ec.message());
  }
  optim::fsync_path(aside.string());
  optim::fsync_path(dir);
  return newer;
}

void truncate_metrics_at(const std::string& given, std::int64_t step) {
  std::error_code ec;
  if (!fs::is_regular_file(given, ec)) return;
  std::ifstream in(given);
  std::ostringstream kept;
  std::string line;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A last line cut short (no newline, no JSON): a write the stop tore.
    if (in.eof() && row.is_discarded()) continue;
    if (row.is_object() && row.contains("step") && row["step"].is_number_integer() &&
        row["step"].get<std::int64_t>() >= step)
      continue;
    kept << line << '\n';
  }
  in.close();
  write_whole_file(given, kept.str(), "--metrics");  // Note [Partial files]; a link stays a link
}

}  // namespace zrt::train
