#include "zrt/runtime/io/output_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "zrt/runtime/error.h"
#include "zrt/runtime/io/kernel_filesystem.h"
#include "zrt/runtime/name_digest.h"

namespace zrt {

namespace fs = std::filesystem;

namespace {

// ".NAME.zrt-partial-", the temporary's name before its random number. A
// NAME near the filesystem's limit on a name (255 bytes on most) leaves no
// room for that: its temporary, made at the end of a run, could not be
// created and the run's result was lost. Such a NAME is cut to fit, and a
// digest of the whole of it added, so that two long names sharing a start
// never take each other's leftovers.
std::string partial_prefix(const fs::path& dir, const std::string& name) {
  const std::string tail = ".zrt-partial-";
  constexpr std::size_t kRandomDigits = 10;  // of a 32-bit random number
  long limit = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (limit <= 0) limit = 255;
  const auto max = static_cast<std::size_t>(limit);
  if (1 + name.size() + tail.size() + kRandomDigits <= max) return "." + name + tail;
  char digest[17];
  std::snprintf(digest, sizeof(digest), "%016llx",
                static_cast<unsigned long long>(name_digest(name)));
  const std::size_t fixed = 1 + 1 + 16 + tail.size() + kRandomDigits;
  std::size_t keep = max > fixed ? max - fixed : 0;
  // Not inside a UTF-8 character: a filesystem that takes only valid UTF-8
  // names would refuse the temporary.
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  return "." + name.substr(0, keep) + "~" + digest + tail;
}

}  // namespace

std::string create_partial_file(const fs::path& target, const std::string& what) {
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = partial_prefix(dir, target.filename().string());
  std::error_code list_ec;
  for (const auto& e : fs::directory_iterator(dir, list_ec))
    if (e.path().filename().string().starts_with(prefix)) {
      std::error_code ignored;
      fs::remove(e.path(), ignored);
    }
  std::random_device rd;
  for (int attempt = 0;; ++attempt) {
    const std::string tmp = (dir / (prefix + std::to_string(rd()))).string();
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      return tmp;
    }
    if (errno != EEXIST || attempt == 100)
      ZRT_THROW(CheckpointError, what, " ", target.string(), ": cannot create a temporary file in ",
                dir.string(), ": ", std::strerror(errno));
  }
}

void write_whole_file(const std::string& path, const std::string& text, const std::string& what) {
  auto write_to = [&](const std::string& file) {
    std::ofstream out(file, std::ios::trunc | std::ios::binary);
    out << text;
    out.close();
    return out ? 0 : (errno != 0 ? errno : EIO);
  };
  if (names_a_stream(path)) {
    errno = 0;
    if (const int err = write_to(path))
      ZRT_THROW(CheckpointError, what, " ", path, ": writing failed: ", std::strerror(err));
    return;
  }
  const fs::path target = output_file_target(path, what);
  const std::string tmp = create_partial_file(target, what);
  errno = 0;
  int err = write_to(tmp);
  if (!err) err = fsync_file(tmp);
  std::error_code ec;
  if (!err) fs::rename(tmp, target, ec);
  if (err || ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    ZRT_THROW(CheckpointError, what, " ", path,
              ": writing failed: ", err ? std::strerror(err) : ec.message());
  }
  sync_directory_of(target, what);
}

int fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

void sync_directory_of(const fs::path& target, const std::string& what) {
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  // A directory that may be written but not read (a drop box, mode 0333)
  // cannot be opened to sync: the rename is as durable there as the
  // filesystem makes it, and so on one that cannot sync a directory.
  if (fd < 0 && (errno == EACCES || errno == EPERM)) return;
  const int err = fd < 0 ? errno : (::fsync(fd) == 0 ? 0 : errno);
  if (fd >= 0) ::close(fd);
  if (err != 0 && err != EINVAL && err != EROFS && err != ENOTSUP && err != EOPNOTSUPP &&
      err != ENOSYS)
    ZRT_THROW(CheckpointError, what, " ", target.string(), ": written, but syncing directory ",
              dir.string(), " failed: ", std::strerror(err));
}

bool open_output_stream(std::ofstream& out, const std::string& path, std::ios::openmode mode,
                        const std::function<void()>& waiting_for_reader,
                        const std::function<bool()>& give_up) {
  std::error_code ec;
  int held = -1;
  if (std::filesystem::is_fifo(path, ec)) {
    // Tried without blocking, so that the wait can end on give_up().
    held = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (held < 0 && errno == ENXIO) {
      if (waiting_for_reader) waiting_for_reader();
      for (int err = ENXIO; held < 0 && err == ENXIO;) {  // the message may have set errno
        if (give_up && give_up()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        held = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        err = errno;
      }
    }
  }
  errno = 0;  // for the caller's message when the open fails
  out.open(path, mode);
  const int open_errno = errno;
  if (held >= 0) ::close(held);
  errno = open_errno;
  return true;
}

bool names_a_stream(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // through links
  return !ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

const char* file_type_name(fs::file_type t) {
  switch (t) {
    case fs::file_type::not_found:
      return "missing";
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

fs::path output_file_target(const std::string& path, const std::string& what) {
  ZRT_CHECK_ARG(!path.empty(), what, ": empty output path");
  fs::path p(path);
  constexpr int kMaxLinks = 40;  // as the kernel's ELOOP limit
  for (int hops = 0;; ++hops) {
    std::error_code ec;
    const fs::file_status s = fs::symlink_status(p, ec);
    if (s.type() != fs::file_type::symlink) break;
    ZRT_CHECK_ARG(hops < kMaxLinks, what, " ", path, ": too many levels of symbolic links");
    const fs::path next = fs::read_symlink(p, ec);
    ZRT_CHECK_ARG(!ec, what, " ", path, ": cannot read the link ", p.string(), ": ", ec.message());
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  std::error_code ec;
  const fs::file_status s = fs::status(p, ec);
  // A name longer than the filesystem takes, a loop of links in the
  // directories: the system's reason, not "not a regular file".
  ZRT_CHECK_ARG(s.type() != fs::file_type::none, what, " ", path, ": ", ec.message());
  // A link under /proc/self/fd names a pipe or socket by text ("pipe:[N]"),
  // no path to follow: the kernel's own resolution says what it is.
  if (s.type() == fs::file_type::not_found) {
    const fs::file_status direct = fs::status(path, ec);
    if (direct.type() != fs::file_type::not_found && direct.type() != fs::file_type::none) {
      ZRT_CHECK_ARG(direct.type() != fs::file_type::regular, what, " ", path,
                    " names an open file without a path (a deleted file or a descriptor); "
                    "zrt writes its outputs to a path");
      ZRT_THROW(InvalidArgument, what, " ", path, " is ", file_type_name(direct.type()),
                "; zrt writes its outputs only to regular files");
    }
  }
  ZRT_CHECK_ARG(s.type() == fs::file_type::not_found || s.type() == fs::file_type::regular, what,
                " ", path, (p.string() == path ? std::string() : " (-> " + p.string() + ")"),
                " is ", file_type_name(s.type()), "; zrt writes its outputs only to regular files");
  return p;
}

fs::path check_output_file(const std::string& path, const std::string& what) {
  const fs::path target = output_file_target(path, what);
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  ZRT_CHECK_ARG(fs::is_directory(parent), what, " ", path, ": ",
                fs::exists(parent) ? parent.string() + " is not a directory"
                                   : "directory " + parent.string() + " does not exist");
  refuse_kernel_filesystem(detail::concat(what, " ", path), parent);
  ZRT_CHECK_ARG(::access(parent.c_str(), W_OK) == 0, what, " ", path, ": directory ",
                parent.string(), " is not writable");
  ZRT_CHECK_ARG(!fs::is_directory(target), what, " ", path, " is a directory");
  return target;
}

}  // namespace zrt
