// A timeline of one rank in the Chrome trace format (chrome://tracing,
// ui.perfetto.dev): complete events with a start and a duration, and counters.
//
// Note [Trace timeline]
// ~~~~~~~~~~~~~~~~~~~~~
// Times are host wall-clock microseconds since the Tracer was made. On the
// CPU an event spans the work itself: a collective queued on a CPU
// communication stream is traced on that stream's thread while it runs
// (Note [CPU streams]); on CUDA an event spans the host's issue of the work,
// which is asynchronous, so device time is not what the bars show. Thread
// ids split the rows: kComputeTrack for the rank's thread, kCommTrack for
// collectives. On the compute track the category says what the rank's
// thread does: "compute" (forward, backward, optimizer), "wait" (blocked on
// a gather or a reduction), "issue" (handing collectives to their stream).
// Recording is thread-safe; one Tracer serves one rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zrt {

class Tracer {
 public:
  static constexpr int kComputeTrack = 0;
  static constexpr int kCommTrack = 1;

  explicit Tracer(int rank);

  // Records [construction, destruction) as one event.
  class Scope {
   public:
    Scope(Tracer* tracer, std::string name, const char* category, int track,
          std::map<std::string, double> args);
    Scope(Scope&&) noexcept;
    ~Scope();

   private:
    Tracer* tracer_;
    std::string name_;
    const char* category_;
    int track_;
    std::map<std::string, double> args_;
    double start_us_;
  };
  Scope scope(std::string name, const char* category, int track,
              std::map<std::string, double> args = {}) {
    return Scope(this, std::move(name), category, track, std::move(args));
  }
  void counter(const std::string& name, const std::map<std::string, double>& values);
  // A complete event timed elsewhere (e.g. by device events), in now_us() time.
  void complete(std::string name, const char* category, int track, double start_us, double end_us,
                std::map<std::string, double> args = {});

  std::size_t num_events() const;

  // How much of the time spent in events of `category` (from `since_us` on)
  // lies inside events of `with_category`: e.g. collectives ("comm") that
  // ran while the rank computed ("compute"), the overlap a prefetch buys.
  struct Overlap {
    double busy_us = 0;        // the union of `category`'s events
    double overlapped_us = 0;  // the part of it inside `with_category`'s events
    double fraction() const { return busy_us > 0 ? overlapped_us / busy_us : 0; }
  };
  Overlap overlap(const std::string& category, const std::string& with_category,
                  double since_us = 0) const;
  // The events recorded since the last call, one JSON object each (the
  // first call leads with the metadata naming the rank and its tracks), no
  // longer held: a long run streams its trace instead of keeping it.
  std::vector<std::string> take_event_lines();
  double now_us() const;

 private:
  struct Event {
    char phase;  // 'X' complete, 'C' counter
    std::string name;
    const char* category;
    int track;
    double ts_us, dur_us;
    std::map<std::string, double> args;
  };
  void add(Event e);
  std::vector<std::string> metadata_lines() const;
  std::string event_line(const Event& e) const;

  int rank_;
  std::chrono::steady_clock::time_point t0_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  bool metadata_taken_ = false;
};

using TracerPtr = std::shared_ptr<Tracer>;

}  // namespace zrt
