// One writer at a time per checkpoint directory: a zrt-train run, or a
// zrt-ckpt reshard writing into it (Note [Resuming never loses work] in
// tools/train/main.cpp). The lock is an flock on DIR/.zrt-run.lock, whose
// first line says who holds it.
#pragma once

#include <string>
#include <string_view>

namespace zrt::tools {

inline constexpr const char* kRunLockName = ".zrt-run.lock";

class RunLock {
 public:
  // Takes DIR's run lock for `program` ("zrt-train"), which names DIR by
  // `what` ("--checkpoint-dir"); InvalidArgument naming the holder's pid,
  // host and start time when another has it. On a filesystem without locks
  // it warns and holds nothing.
  RunLock(const std::string& dir, const std::string& what, const char* program);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// The first line of DIR's run lock (who holds it); empty when there is none.
std::string run_lock_note(const std::string& dir);
// Whether `line` is a note RunLock writes ("pid N on HOST, started ...").
bool is_run_lock_note(std::string_view line);
// Whether `path` is a run lock a RunLock left: a regular file (a FIFO is
// never opened) whose first line is empty or such a note.
bool is_run_lock_file(const std::string& path);

}  // namespace zrt::tools
