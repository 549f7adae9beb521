#include "zrt/optim/checkpoint/durable_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zrt/optim/checkpoint/checksum.h"
#include "zrt/optim/checkpoint/index_checksum.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/io/input_file.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/path_overlap.h"

namespace zrt::optim {

namespace fs = std::filesystem;

namespace {

// The second line of `latest`: "index-xxh64 <16 hex digits>".
constexpr const char* kLatestChecksumPrefix = "index-xxh64 ";

std::string errno_text() { return std::strerror(errno); }

std::string parent_of(const std::string& path) {
  const fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

}  // namespace

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ZRT_THROW(CheckpointError, path, ": cannot open to fsync: ", errno_text());
  const int rc = ::fsync(fd);
  const std::string why = rc != 0 ? errno_text() : "";
  ::close(fd);
  if (rc != 0) ZRT_THROW(CheckpointError, path, ": fsync failed: ", why);
}

void write_file_durably(const std::string& given, std::string_view bytes) {
  // Through links, never over a device (Note [Outputs write through links, never over devices]).
  const std::string path = output_file_target(given, "checkpoint file").string();
  const std::string tmp = path + ".tmp";
  try {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) ZRT_THROW(CheckpointError, tmp, ": cannot create: ", errno_text());
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = errno_text();
        ::close(fd);
        ZRT_THROW(CheckpointError, tmp, ": write failed after ", done, " of ", bytes.size(),
                  " bytes: ", why);
      }
      done += static_cast<std::size_t>(n);
    }
    const bool synced = ::fsync(fd) == 0;
    const std::string why = synced ? "" : errno_text();
    if (::close(fd) != 0 || !synced) ZRT_THROW(CheckpointError, tmp, ": fsync/close failed: ", why);
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      ZRT_THROW(CheckpointError, path, ": cannot rename ", tmp, " into place: ", errno_text());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  fsync_path(parent_of(path));
}

std::string step_dir_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::optional<std::int64_t> parse_step_dir_name(std::string_view name) {
  constexpr std::string_view prefix = "step-";
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  // Every step an int64 counts, up to its 19 digits; more is no step.
  std::int64_t step = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  // Only the name step_dir_name writes: a copy named step-4 is the user's,
  // and would be looked for as step-000004.
  if (step_dir_name(step) != name) return std::nullopt;
  return step;
}

std::vector<std::int64_t> complete_steps(const std::string& root) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    if (auto s = parse_step_dir_name(e.path().filename().string())) steps.push_back(*s);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<std::int64_t> indexed_steps(const std::string& root) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (std::int64_t step : complete_steps(root))
    if (fs::exists(fs::path(root) / step_dir_name(step) / kIndexFileName, ec))
      steps.push_back(step);
  return steps;
}

std::string checkpoint_root_of(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (p.filename() != "latest" || !fs::is_regular_file(p, ec)) return path;
  return p.has_parent_path() ? p.parent_path().string() : ".";
}

namespace {
// Refuses `out` when directory `first` or one above it is a checkpoint step
// (step-N holding index.json); `first_is_out`: `first` is `out` itself.
void check_outside_steps_from(const fs::path& first, const NamedPath& out, bool first_is_out) {
  std::error_code ec;
  for (fs::path p = first; !p.empty(); p = p.parent_path()) {
    const bool step =
        parse_step_dir_name(p.filename().string()) && fs::exists(p / kIndexFileName, ec);
    ZRT_CHECK_ARG(!step || !first_is_out || p != first, out.what, " ", out.path,
                  " is checkpoint step ", p.string(),
                  " itself: writing there would change that step; name the directory that "
                  "holds the steps, ",
                  p.parent_path().string());
    ZRT_CHECK_ARG(!step, out.what, " ", out.path, " is inside checkpoint step ", p.string(),
                  ": writing it would destroy that step");
    if (p == p.root_path()) break;
  }
}
}  // namespace

void check_output_outside_checkpoint_steps(const NamedPath& out) {
  std::error_code ec;
  // Through links, dangling ones too: a write lands on the link's target.
  const fs::path target = resolved_path(output_file_target(out.path, out.what).string());
  // A checkpoint root's own files: `latest`, and the run's lock and
  // temporaries (.zrt-*), which a running zrt-train holds.
  const std::string name = target.filename().string();
  ZRT_CHECK_ARG(!((fs::exists(target.parent_path() / "latest", ec) &&
                   (name == "latest" || name.starts_with(".zrt-"))) ||
                  (name.starts_with(".zrt-") && fs::exists(target, ec))),
                out.what, " ", out.path, " is the checkpoint directory ",
                target.parent_path().string(), "'s own ", name,
                " file: writing it would break that directory's runs");
  check_outside_steps_from(target.parent_path(), out, false);
}

void check_directory_outside_checkpoint_steps(const NamedPath& dir) {
  check_outside_steps_from(resolved_path(dir.path), dir, true);
}

std::string resolve_checkpoint(const std::string& path,
                               std::optional<std::string>* latest_index_xxh64) {
  if (latest_index_xxh64) latest_index_xxh64->reset();
  std::error_code ec;
  if (!fs::exists(path, ec)) ZRT_THROW(CheckpointError, path, ": no such checkpoint");
  if (fs::exists(fs::path(path) / kIndexFileName, ec)) return path;
  if (const std::string root = checkpoint_root_of(path); root != path)
    return resolve_checkpoint(root, latest_index_xxh64);
  const fs::path latest = fs::path(path) / "latest";
  if (!fs::exists(latest, ec)) {
    // Steps without their `latest` (removed, or never published): name one.
    const std::vector<std::int64_t> steps = indexed_steps(path);
    if (!steps.empty())
      ZRT_THROW(CheckpointError, path, ": holds ", steps.size(), " checkpoint step(s), newest ",
                step_dir_name(steps.back()),
                ", but no `latest` file naming one: name a step directory, such as ",
                (fs::path(path) / step_dir_name(steps.back())).string());
    ZRT_THROW(CheckpointError, path,
              ": not a checkpoint (neither index.json of a step nor a `latest` file naming one is "
              "there)");
  }
  if (fs::is_directory(latest, ec))
    ZRT_THROW(CheckpointError, latest.string(),
              " is a directory, not a file: `latest` is a file whose first line names the newest "
              "step (move the directory away)");
  // Note [One rule for every file zrt reads]: a step name and a checksum line.
  std::istringstream in(
      read_input_file(latest.string(), 4096, InputKind::checkpoint, "the checkpoint's `latest`"));
  std::string name, line;
  std::getline(in, name);
  if (!parse_step_dir_name(name)) {
    std::string shown;  // a Windows line end's \r made visible
    for (char c : name.substr(0, 80)) shown += c == '\r' ? std::string("\\r") : std::string(1, c);
    ZRT_THROW(CheckpointError, latest.string(), ": does not name a step directory (holds '", shown,
              "')");
  }
  // An older zrt (or a hand) writes the first line only; what follows must be the checksum line, nothing else.
  std::vector<std::string> more;
  while (std::getline(in, line))
    if (!line.empty()) more.push_back(line);
  const std::string_view prefix = kLatestChecksumPrefix;
  if (more.size() > 1 ||
      (more.size() == 1 && (more[0].compare(0, prefix.size(), prefix) != 0 ||
                            !is_checksum_hex(std::string_view(more[0]).substr(prefix.size())))))
    ZRT_THROW(CheckpointError, latest.string(), ": after the step name it may hold one line '",
              prefix, "<16 hex digits>', it holds '", more[0].substr(0, 80), "'",
              more.size() > 1 ? " and more" : "");
  const fs::path step = fs::path(path) / name;
  if (!fs::exists(step / kIndexFileName, ec)) {
    // Gone or emptied by a hand: the checkpoints still there are the way on.
    const std::vector<std::int64_t> left = indexed_steps(path);
    ZRT_THROW(CheckpointError, latest.string(), ": names ", name, ", which ",
              fs::exists(step, ec) ? "has no index.json" : "does not exist",
              left.empty() ? std::string("; no other step here is a checkpoint")
                           : "; the newest checkpoint here is " +
                                 (fs::path(path) / step_dir_name(left.back())).string() +
                                 " (name it to load it)");
  }
  if (latest_index_xxh64 && !more.empty()) *latest_index_xxh64 = more[0].substr(prefix.size());
  return step.string();
}

void publish_latest(const std::string& root, std::int64_t step) {
  const std::string name = step_dir_name(step);
  const std::optional<std::string> checksum =
      read_index_checksum_file((fs::path(root) / name).string());
  write_file_durably(
      (fs::path(root) / "latest").string(),
      name + "\n" + (checksum ? std::string(kLatestChecksumPrefix) + *checksum + "\n" : ""));
}

void prune_steps(const std::string& root, int keep_last) {
  if (keep_last <= 0) return;
  // Checkpoints only: a step-N without an index is none of ours (a user's
  // directory of that name), neither counted nor removed.
  const std::vector<std::int64_t> steps = indexed_steps(root);
  std::optional<std::int64_t> latest;
  try {
    latest = parse_step_dir_name(fs::path(resolve_checkpoint(root)).filename().string());
  } catch (const CheckpointError&) {
    return;  // nothing is published: prune nothing
  }
  const std::size_t keep = static_cast<std::size_t>(keep_last);
  for (std::size_t i = 0; i + keep < steps.size(); ++i)
    if (!latest || steps[i] != *latest) retire_step(root, steps[i]);
}

void retire_step(const std::string& root, std::int64_t step) {
  const fs::path dir = fs::path(root) / step_dir_name(step);
  const fs::path gone = fs::path(root) / (step_dir_name(step) + ".retired.tmp");
  std::error_code ec;
  fs::remove_all(gone, ec);
  fs::rename(dir, gone, ec);
  if (ec) ZRT_THROW(CheckpointError, dir.string(), ": cannot retire: ", ec.message());
  fsync_path(root);
  fs::remove_all(gone, ec);
  if (ec) ZRT_THROW(CheckpointError, gone.string(), ": cannot remove: ", ec.message());
}

bool is_checkpoint_temporary(const std::string& name) {
  constexpr std::string_view suffix = ".tmp";
  if (!name.ends_with(suffix) || name.size() == suffix.size()) return false;
  std::string stem = name.substr(0, name.size() - suffix.size());
  constexpr std::string_view retired = ".retired";
  if (stem.size() > retired.size() && stem.ends_with(retired))
    stem.resize(stem.size() - retired.size());
  return stem == "latest" || parse_step_dir_name(stem).has_value();
}

void remove_stale_temporaries(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (!is_checkpoint_temporary(e.path().filename().string())) continue;
    std::error_code ignored;
    fs::remove_all(e.path(), ignored);
  }
}

}  // namespace zrt::optim
