#include "zrt/runtime/io/scratch_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "zrt/runtime/error.h"

namespace zrt {

ScratchFile::ScratchFile(const std::string& dir, const std::string& stem, std::uint64_t bytes) : bytes_(bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  ZRT_CHECK_ARG(fs::is_directory(dir, ec), "scratch directory ", dir, " does not exist or is not a directory");
  ZRT_CHECK_ARG(::access(dir.c_str(), W_OK) == 0, "scratch directory ", dir, " is not writable");
  // A name another process (or rank) holds this instant gets a number.
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = (fs::path(dir) / (stem + "." + std::to_string(::getpid()) + (attempt ? "-" + std::to_string(attempt) : "") +
                              ".bin")).string();
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
  ZRT_THROW(ResourceError, "cannot reserve ", bytes_, " bytes for scratch file ", path_, ": ", std::strerror(err),
            ec ? std::string() : detail::concat(" (", space.available, " bytes available in ", dir, ")"));
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ScratchFile::read(std::uint64_t offset, std::span<std::byte> out) const {
  ZRT_CHECK_ARG(offset + out.size() <= bytes_, "scratch file ", path_, ": read of ", out.size(), " bytes at ", offset,
                " is past its ", bytes_, " bytes");
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ZRT_THROW(ResourceError, "reading ", out.size(), " bytes at offset ", offset, " of scratch file ", path_,
                " failed: ", n == 0 ? "unexpected end of file" : std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

void ScratchFile::write(std::uint64_t offset, std::span<const std::byte> in) const {
  ZRT_CHECK_ARG(offset + in.size() <= bytes_, "scratch file ", path_, ": write of ", in.size(), " bytes at ", offset,
                " is past its ", bytes_, " bytes");
  std::size_t done = 0;
  while (done < in.size()) {
    const ssize_t n = ::pwrite(fd_, in.data() + done, in.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ZRT_THROW(ResourceError, "writing ", in.size(), " bytes at offset ", offset, " of scratch file ", path_,
                " failed: ", n == 0 ? "nothing written" : std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace zrt
