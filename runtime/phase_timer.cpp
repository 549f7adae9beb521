// See phase_timer.h.
#include "zrt/runtime/phase_timer.h"

#include <exception>

#include "zrt/runtime/error.h"

namespace zrt {

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& o) {
  forward_ms += o.forward_ms;
  backward_ms += o.backward_ms;
  optimizer_ms += o.optimizer_ms;
  comm_ms += o.comm_ms;
  return *this;
}

PhaseTimer::PhaseTimer(Device device) : device_(device) {}

bool PhaseTimer::can_time(Stream stream) const {
  return device_.is_cpu() ? stream.is_cpu() : stream.device() == device_;
}

std::size_t PhaseTimer::begin(Phase phase, Stream stream) {
  ZRT_CHECK_ARG(can_time(stream), "PhaseTimer on ", device_.str(), " cannot time a stream on ",
                stream.device().str());
  std::lock_guard lock(mu_);
  if (used_ == intervals_.size())
    intervals_.push_back(Interval{phase, Event(device_, true), Event(device_, true)});
  Interval& i = intervals_[used_];
  i.phase = phase;
  i.start.record(stream);
  i.open = true;
  return used_++;
}

void PhaseTimer::end(std::size_t interval, Stream stream) {
  std::lock_guard lock(mu_);
  ZRT_CHECK_ARG(interval < used_ && intervals_[interval].open, "PhaseTimer::end: interval ",
                interval, " is not open");
  intervals_[interval].end.record(stream);
  intervals_[interval].open = false;
}

PhaseTimes PhaseTimer::read() {
  std::lock_guard lock(mu_);
  PhaseTimes t;
  for (std::size_t k = 0; k < used_; ++k) {
    const Interval& i = intervals_[k];
    ZRT_CHECK_STATE(!i.open, "PhaseTimer::read: an interval is still open");
    i.end.synchronize();
    const double ms = Event::elapsed_ms(i.start, i.end);
    switch (i.phase) {
      case Phase::forward:
        t.forward_ms += ms;
        break;
      case Phase::backward:
        t.backward_ms += ms;
        break;
      case Phase::optimizer:
        t.optimizer_ms += ms;
        break;
      case Phase::comm:
        t.comm_ms += ms;
        break;
    }
  }
  used_ = 0;
  return t;
}

PhaseTimer::Scope::Scope(PhaseTimer* timer, Phase phase, Stream stream)
    : timer_(timer && timer->can_time(stream) ? timer : nullptr), stream_(stream) {
  if (timer_) interval_ = timer_->begin(phase, stream);
}

PhaseTimer::Scope::~Scope() {
  if (!timer_) return;
  try {
    timer_->end(interval_, stream_);
  } catch (const std::exception& e) {
    report_in_destructor("~PhaseTimer::Scope", e);
  }
}

}  // namespace zrt
