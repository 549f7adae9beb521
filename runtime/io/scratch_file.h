// A scratch file: room on disk for data that does not fit in memory (AdamW's
// moments with --offload-optimizer disk:DIR), read and written at offsets
// from any thread.
//
// Note [Scratch files]
// ~~~~~~~~~~~~~~~~~~~~
// The file is created new (O_EXCL: never an existing file) and unlinked at
// once, so it is removed however the process ends, a crash or SIGKILL
// included; its blocks are freed when the descriptor closes. Its whole size
// is allocated up front (posix_fallocate), so a disk without room fails at
// creation, naming the directory, the bytes and the space available, and not
// halfway through an update. Fresh blocks read as zeros. Every read and write
// moves the whole range or throws ResourceError naming the file, the range
// and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace zrt {

// InvalidArgument unless `dir` is a directory this process can write: the
// check of ScratchFile's constructor, for a caller that checks its settings
// before it makes the file.
void check_scratch_dir(const std::string& dir);

class ScratchFile {
 public:
  // A file of `bytes` bytes in directory `dir` (which must exist), named
  // `stem`.PID.bin (or `stem`.PID-N.bin while that name is taken). InvalidArgument when `dir` is not a writable directory,
  // ResourceError when the disk has no room.
  ScratchFile(const std::string& dir, const std::string& stem, std::uint64_t bytes);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  void read(std::uint64_t offset, std::span<std::byte> out) const;
  void write(std::uint64_t offset, std::span<const std::byte> in) const;
  const std::string& path() const { return path_; }  // as created (already unlinked)
  std::uint64_t size() const { return bytes_; }

 private:
  std::string path_;
  std::uint64_t bytes_ = 0;
  int fd_ = -1;
};

}  // namespace zrt
