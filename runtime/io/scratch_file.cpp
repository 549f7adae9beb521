#include "zrt/runtime/io/scratch_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "zrt/runtime/error.h"

namespace zrt {

void check_scratch_dir(const std::string& dir) {
  std::error_code ec;
  ZRT_CHECK_ARG(!dir.empty(), "no scratch directory given (an empty path)");
  ZRT_CHECK_ARG(std::filesystem::is_directory(dir, ec), "scratch directory ", dir,
                " does not exist or is not a directory");
  ZRT_CHECK_ARG(::access(dir.c_str(), W_OK) == 0, "scratch directory ", dir, " is not writable");
}

ScratchFile::ScratchFile(const std::string& dir, const std::string& stem, std::uint64_t bytes)
    : bytes_(bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check_scratch_dir(dir);
  // A name another process (or rank) holds this instant gets a number.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = (fs::path(dir) / (stem + "." + std::to_string(::getpid()) +
                              (attempt ? "-" + std::to_string(attempt) : "") + ".bin"))
                .string();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 1000))
      ZRT_THROW(ResourceError, "cannot create scratch file ", path_, ": ", std::strerror(errno));
  }
  ::unlink(path_.c_str());  // Note [Scratch files]: gone however the process ends
  if (bytes_ == 0) return;
  const int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(bytes_));
  if (err == 0) return;
  const fs::space_info space = fs::space(dir, ec);
  ::close(fd_);
  fd_ = -1;
  ZRT_THROW(
      ResourceError, "cannot reserve ", bytes_, " bytes for scratch file ", path_, ": ",
      std::strerror(err),
      ec ? std::string() : detail::concat(" (", space.available, " bytes available in ", dir, ")"));
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Moves all of `n` bytes at `offset` with pread or pwrite, resuming after
// interruptions and short transfers; ResourceError names what failed.
template <typename Byte, typename Call>
void transfer(const char* verb, const std::string& path, std::uint64_t size, std::uint64_t offset,
              Byte* data, std::size_t n, Call call) {
  ZRT_CHECK_ARG(offset + n <= size, "scratch file ", path, ": ", verb, " of ", n, " bytes at ",
                offset, " is past its ", size, " bytes");
  std::size_t done = 0;
  while (done < n) {
    const ssize_t moved = call(data + done, n - done, static_cast<off_t>(offset + done));
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0)
      ZRT_THROW(ResourceError, verb, " of ", n, " bytes at offset ", offset, " of scratch file ",
                path,
                " failed: ", moved == 0 ? "nothing moved (end of file?)" : std::strerror(errno));
    done += static_cast<std::size_t>(moved);
  }
}

}  // namespace

void ScratchFile::read(std::uint64_t offset, std::span<std::byte> out) const {
  transfer("read", path_, bytes_, offset, out.data(), out.size(),
           [this](std::byte* p, std::size_t n, off_t at) { return ::pread(fd_, p, n, at); });
}

void ScratchFile::write(std::uint64_t offset, std::span<const std::byte> in) const {
  transfer("write", path_, bytes_, offset, in.data(), in.size(),
           [this](const std::byte* p, std::size_t n, off_t at) { return ::pwrite(fd_, p, n, at); });
}

}  // namespace zrt
