// How a zrt program takes SIGTERM, SIGINT, SIGHUP and SIGPIPE (Note [Stopping on a signal] in
// tools/train/main.cpp, Note [zrt-ckpt stops on a signal] in
// tools/ckpt/main.cpp).
#pragma once

#include <atomic>
#include <cstdint>

namespace zrt::tools {

// Tells the user's second stop signal from a copy of the first. A launcher
// sends one signal twice: `timeout` to the program and then to its process
// group, mpirun forwarding the terminal's Ctrl-C that the group also got;
// a multi-threaded process can take both, milliseconds apart. Counting the
// copy as a second signal ended the run at once, without the checkpoint the
// first asked for. So a signal within kCopyWindowNs of the first is its copy.
// Async-signal-safe (a lock-free atomic and clock_gettime).
class StopSignalTimes {
 public:
  static constexpr std::int64_t kCopyWindowNs = 500'000'000;
  enum class Kind { first, copy, second };
  // Called in the handler: the first signal, a copy of it, or the user's
  // second (exit at once).
  Kind take() noexcept;
  bool requested() const noexcept { return first_ns_.load() != 0; }

 private:
  std::atomic<std::int64_t> first_ns_{0};  // CLOCK_MONOTONIC of the first signal + 1; 0: none
  static_assert(std::atomic<std::int64_t>::is_always_lock_free,
                "a signal handler's atomic must be lock-free");
};

// Sends SIGTERM, SIGINT and SIGHUP (a closed terminal or ssh session) to
// `handler` (unless the program was started with them ignored, as a shell's
// background job or nohup does), then unblocks them, so that one sent while
// they were blocked is delivered now, to the handler. SIGPIPE, raised by a
// write to a pipe whose reader is gone (`| tee` stopped with the job, `|
// head`), goes to `broken_pipe`, or is ignored when that is null, so the
// write fails with EPIPE instead of the signal killing the program without
// a word. SIGXFSZ is ignored: past a file-size limit (ulimit -f) a write
// fails with EFBIG and is reported, instead of the signal killing the
// program and leaving partial files.
void install_stop_handlers(void (*handler)(int), void (*broken_pipe)(int) = nullptr);

}  // namespace zrt::tools
