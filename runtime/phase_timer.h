// Where a training step's time goes: forward, backward, optimizer and
// communication, timed by events on the streams that run them.
//
// Note [Step phase times]
// ~~~~~~~~~~~~~~~~~~~~~~~
// An interval of a phase is two timing events recorded on the stream that
// runs it, at its start and its end. On CUDA the time between them is
// device time: from the stream reaching the start to its reaching the end,
// so the kernels count, not their issue, and a wait of that stream for
// another inside the interval counts too. On the CPU an event completes on
// the host when its stream reaches it (at once on the default stream, on
// the stream's thread for an owned one), and the host clock then is the
// time: the same phases, timed by host timers. Recording never waits: the
// step keeps its one host wait (Note [One host wait per step]). read() sums
// the intervals recorded since the last read and waits for their events, so
// it belongs after the step's own wait (zrt-bench train reads after the
// device synchronisation that ends a timed step, where nothing is left to
// wait for). Communication is every collective issued to a stream by the
// groups the timer is set on (Communicator::set_phase_timer, inherited by
// the groups split from them), on that stream: it runs beside the other
// phases, so the four need not add up to the step. Events are kept and
// reused from read to read. Thread-safe: one timer serves one rank.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

#include "zrt/runtime/stream.h"

namespace zrt {

enum class Phase { forward, backward, optimizer, comm };

// Milliseconds per phase, summed over the intervals read.
struct PhaseTimes {
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0, comm_ms = 0;
  PhaseTimes& operator+=(const PhaseTimes& o);
};

class PhaseTimer {
 public:
  // Times work on `device`'s streams (CUDA events, or CPU events for cpu).
  explicit PhaseTimer(Device device);

  // Whether this timer's events can record `stream`: a CUDA stream of a CUDA
  // timer, a CPU stream (default or owned) of a CPU timer.
  bool can_time(Stream stream) const;
  // Opens an interval of `phase` on `stream`; end() closes it on the same
  // stream. InvalidArgument for a stream it cannot time.
  std::size_t begin(Phase phase, Stream stream);
  void end(std::size_t interval, Stream stream);

  // begin() at construction and end() at destruction; does nothing without
  // a timer or for a stream it cannot time (a host collective beside a
  // CUDA world's).
  class Scope {
   public:
    Scope(PhaseTimer* timer, Phase phase, Stream stream);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PhaseTimer* timer_;
    Stream stream_;
    std::size_t interval_ = 0;
  };

  // The sums of the intervals since the last read; waits for their events.
  // InvalidState when an interval is still open.
  PhaseTimes read();
  Device device() const { return device_; }

 private:
  struct Interval {
    Phase phase;
    Event start, end;
    bool open = false;
  };
  Device device_;
  std::mutex mu_;
  std::deque<Interval> intervals_;  // [0, used_) since the last read; the rest for reuse
  std::size_t used_ = 0;
};

using PhaseTimerPtr = std::shared_ptr<PhaseTimer>;

}  // namespace zrt
