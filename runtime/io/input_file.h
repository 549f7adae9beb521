// Reading a file zrt was given, under one rule.
//
// Note [One rule for every file zrt reads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every file zrt reads (a checkpoint's index.json, its .xxh64 and `latest`,
// an --init-from or exported safetensors file, a --data file) is opened the
// same way: O_NONBLOCK, so that opening a FIFO returns at once instead of
// waiting for a writer that never comes; then fstat on the open file, and
// anything that is not a regular file (a FIFO, a device such as /dev/zero,
// a directory, a socket) is refused with an error naming the file and what
// it is, and so is a file of the kernel's (/proc, /sys), whose reported
// size is not its contents; then its size is bounded by what its format allows, so a huge file
// is refused before it is read instead of running memory out. Links are
// followed: the rule applies to what they name. Missing files are the
// caller's to name (each knows what a missing file means for it).
#pragma once

#include <cstdint>
#include <string>

namespace zrt {

// Which error a refused input throws: the one its readers already use.
enum class InputKind {
  argument,    // InvalidArgument: a file the user named (--data, --init-from)
  checkpoint,  // CheckpointError: a file inside a checkpoint
};

// An open, regular input file (closed on destruction).
class InputFile {
 public:
  // Throws (per `kind`) naming `what` ("--init-from", "checkpoint index") and
  // `path` when it cannot be opened, is not a regular file, or holds more
  // than `max_bytes`.
  InputFile(const std::string& path, std::uint64_t max_bytes, InputKind kind,
            const std::string& what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  // The whole file (it was checked to be at most max_bytes).
  std::string read_all() const;
  // Up to `n` bytes from `offset` into `dst`; fewer only where the file ends
  // (it may shrink while read). Throws (per `kind`) when the read fails.
  std::uint64_t read_at(std::uint64_t offset, void* dst, std::uint64_t n) const;

 private:
  std::string path_;
  InputKind kind_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// InputFile(path, max_bytes, kind, what).read_all().
std::string read_input_file(const std::string& path, std::uint64_t max_bytes, InputKind kind,
                            const std::string& what);

}  // namespace zrt
