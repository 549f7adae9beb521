#include "zrt/runtime/io/output_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "zrt/runtime/error.h"

namespace zrt {

namespace fs = std::filesystem;

std::string create_partial_file(const fs::path& target, const std::string& what) {
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = "." + target.filename().string() + ".zrt-partial-";
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
  const int err = write_to(tmp);
  std::error_code ec;
  if (!err) fs::rename(tmp, target, ec);
  if (err || ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    ZRT_THROW(CheckpointError, what, " ", path,
              ": writing failed: ", err ? std::strerror(err) : ec.message());
  }
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

}  // namespace zrt
