#include "tools/common/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "zrt/runtime/error.h"

namespace zrt::tools {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "an unknown host";
}

// "2026-11-27 14:20:01 UTC": when a run took its directory, for people.
std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  char text[32] = {};
  if (::gmtime_r(&now, &utc) == nullptr ||
      std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc) == 0)
    return "at unix time " + std::to_string(static_cast<long long>(now));
  return text;
}

}  // namespace

RunLock::RunLock(const std::string& dir, const std::string& what, const char* program) {
  const std::string path = (fs::path(dir) / kRunLockName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ZRT_CHECK_AS(ResourceError, fd_ >= 0, "cannot open the run lock ", path, ": ",
               std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (const int err = errno; err != EWOULDBLOCK) {
      // A filesystem without locks (some network mounts): run unguarded, and say so.
      std::fprintf(
          stderr,
          "%s: warning: cannot lock %s (%s): nothing stops a second run in this directory\n",
          program, path.c_str(), std::strerror(err));
      return;
    }
    std::ifstream in(path);
    std::string holder;
    std::getline(in, holder);
    ::close(fd_);
    fd_ = -1;
    ZRT_THROW(InvalidArgument, what, " ", dir, " is in use by another run (",
              holder.empty() ? std::string("its holder wrote nothing yet") : holder,
              "): two runs in one checkpoint directory would overwrite each other's steps");
  }
  const std::string me =
      "pid " + std::to_string(::getpid()) + " on " + host_name() + ", started " + utc_now() + "\n";
  if (::ftruncate(fd_, 0) != 0 ||
      ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()) ||
      ::fsync(fd_) != 0) {  // flushed: another host's ranks read it (run_lock_note)
    // The lock holds without its note; a second run's message says less.
  }
}

std::string run_lock_note(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kRunLockName);
  std::string note;
  std::getline(in, note);
  return note;
}

bool is_run_lock_note(std::string_view line) {
  constexpr std::string_view pid = "pid ";
  if (!line.starts_with(pid)) return false;
  const std::size_t end = line.find_first_not_of("0123456789", pid.size());
  return end > pid.size() && end != std::string_view::npos && line.substr(end).starts_with(" on ");
}

bool is_run_lock_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  return first.empty() || is_run_lock_note(first);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

}  // namespace zrt::tools
