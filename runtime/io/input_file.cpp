#include "zrt/runtime/io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zrt/runtime/error.h"
#include "zrt/runtime/io/kernel_filesystem.h"

namespace zrt {

namespace {

[[noreturn]] void refuse(InputKind kind, const std::string& message) {
  if (kind == InputKind::checkpoint) ZRT_THROW(CheckpointError, message);
  ZRT_THROW(InvalidArgument, message);
}

const char* kind_of_file(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

InputFile::InputFile(const std::string& path, std::uint64_t max_bytes, InputKind kind,
                     const std::string& what)
    : path_(path), kind_(kind) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0)
    refuse(kind, detail::concat(what, " ", path, " cannot be opened: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string type = kind_of_file(st.st_mode);
    ::close(fd_);
    fd_ = -1;
    refuse(kind, detail::concat(what, " ", path, " is ", type, ", not a regular file"));
  }
  // The kernel's files report a size that is not their contents (0 for
  // /proc/cpuinfo): "empty" or "truncated" would misname them.
  struct statfs fs {};
  if (::fstatfs(fd_, &fs) == 0)
    if (const char* kernel = kernel_filesystem_name(static_cast<unsigned long>(fs.f_type))) {
      ::close(fd_);
      fd_ = -1;
      refuse(kind, detail::concat(what, " ", path, " is a file of the kernel (on ", kernel,
                                  "), not a file on a disk: copy it to one first"));
    }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > max_bytes) {
    ::close(fd_);
    fd_ = -1;
    refuse(kind, detail::concat(what, " ", path, " holds ", size_, " bytes, more than the ",
                                max_bytes, " such a file can hold"));
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string InputFile::read_all() const {
  std::string bytes(size_, '\0');
  bytes.resize(read_at(0, bytes.data(), size_));  // it shrank while being read
  return bytes;
}

std::uint64_t InputFile::read_at(std::uint64_t offset, void* dst, std::uint64_t n) const {
  char* out = static_cast<char*>(dst);
  std::uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) refuse(kind_, detail::concat(path_, ": read failed: ", std::strerror(errno)));
    if (got == 0) break;  // the end of the file
    done += static_cast<std::uint64_t>(got);
  }
  return done;
}

std::string read_input_file(const std::string& path, std::uint64_t max_bytes, InputKind kind,
                            const std::string& what) {
  return InputFile(path, max_bytes, kind, what).read_all();
}

}  // namespace zrt
