// What a long start is doing, said while it does it (Note [A slow start
// says so]).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace zrt::train {

// Note [A slow start says so]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// zrt-train prints its first line when the ranks have built their model, and
// setting up can take minutes: the memory plan's dry steps, reading a large
// data set or --init-from file, drawing the weights of a deep model (the
// plan of a 65,536-layer model alone runs for minutes). A start that said
// nothing for that long looks hung. So the setup names each phase it
// enters, and a phase still running after `quiet` (5 s) is printed with the
// seconds since the start, then again every `every` (60 s); a start that
// finishes within `quiet` prints nothing more than it did. One process
// prints (the lead's), from a thread of its own that waits on the phases.
class SetupNotice {
 public:
  using Clock = std::chrono::steady_clock;
  // Inert where !prints (another process's ranks). `io`: the lock of the
  // lines on `out`.
  SetupNotice(std::FILE* out, std::mutex& io, bool prints,
              std::chrono::milliseconds quiet = std::chrono::seconds(5),
              std::chrono::milliseconds every = std::chrono::seconds(60));
  ~SetupNotice();
  SetupNotice(const SetupNotice&) = delete;
  SetupNotice& operator=(const SetupNotice&) = delete;

  // The phase the setup enters: "reading the data set x.bin".
  void phase(std::string what);
  // The setup is over: nothing more is printed (before the run's first line).
  void done();

 private:
  void watch();

  std::FILE* out_;
  std::mutex& io_;
  const std::chrono::milliseconds quiet_, every_;
  const Clock::time_point start_ = Clock::now();
  std::mutex m_;
  std::condition_variable changed_;
  std::string what_;             // the phase now; empty before the first
  Clock::time_point next_line_;  // when its next line is due
  std::uint64_t phases_ = 0;     // phases entered: a change wakes the watcher
  bool done_ = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace zrt::train
