// See Note [Comm watchdog] in comm_watchdog.h.
#include "zrt/runtime/comm/comm_watchdog.h"

#include <algorithm>
#include <set>
#include <thread>

#include "zrt/runtime/cpu_stream.h"
#include "zrt/runtime/error.h"

namespace zrt {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kSpin = std::chrono::microseconds(200);
constexpr auto kFirstPoll = std::chrono::microseconds(20);
constexpr auto kLongestPoll = std::chrono::milliseconds(1);

bool unfinished(const FlightEntry& e) { return e.state == "issued" || e.state == "running"; }

// The watched groups' flight recorders, each once (groups split from one
// world share one).
std::vector<const FlightRecorder*> rings(const std::vector<Communicator*>& groups) {
  std::vector<const FlightRecorder*> out;
  for (const Communicator* g : groups) {
    const FlightRecorder* f = g->flight_recorder().get();
    if (f != nullptr && std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
  }
  return out;
}

}  // namespace

CommWatchdog::CommWatchdog(const std::vector<Communicator*>& groups) {
  for (Communicator* g : groups)
    if (g != nullptr && std::find(groups_.begin(), groups_.end(), g) == groups_.end())
      groups_.push_back(g);
  ZRT_CHECK_ARG(!groups_.empty(), "CommWatchdog: no group to watch (every one given is null)");
}

CommWatchdog::CommWatchdog(const std::vector<CommPtr>& groups)
    : CommWatchdog([&] {
        std::vector<Communicator*> raw;
        raw.reserve(groups.size());
        for (const CommPtr& g : groups) raw.push_back(g.get());
        return raw;
      }()) {}

std::chrono::milliseconds CommWatchdog::timeout() const {
  std::chrono::milliseconds longest{0};
  for (const Communicator* g : groups_) longest = std::max(longest, g->timeout());
  return longest;
}

std::uint64_t CommWatchdog::progress() const {
  std::uint64_t ended = 0;
  for (const FlightRecorder* f : rings(groups_)) ended += f->ended_count();
  return ended;
}

void CommWatchdog::wait_until(const std::function<bool()>& done, const char* what,
                              bool done_blocks) const {
  ZRT_CHECK_ARG(static_cast<bool>(done), "CommWatchdog: no completion test for ", what);
  if (done()) return;
  const std::chrono::milliseconds limit = timeout();
  // Past the groups' timeout by a grace, so that a backend's own timeout,
  // which names the missing ranks, fires first where there is one (Note
  // [Comm watchdog]).
  const std::chrono::milliseconds patience = watchdog_patience(limit);
  std::uint64_t last_progress = progress();
  Clock::time_point deadline = Clock::now() + patience;
  std::chrono::microseconds pause = kFirstPoll;
  const Clock::time_point spin_until = Clock::now() + kSpin;
  for (;;) {
    for (const Communicator* g : groups_) {
      std::string error = g->async_error();
      if (!error.empty())
        fail(what, detail::concat("the ", g->backend_name(),
                                  " backend reported an asynchronous error on group ", g->name(),
                                  ": ", error));
    }
    if (done()) return;
    const std::uint64_t now_progress = progress();
    const auto now = Clock::now();
    if (now_progress != last_progress) {
      last_progress = now_progress;
      deadline = now + patience;
    } else if (now >= deadline) {
      fail(what, detail::concat(what, " timed out after ", limit.count(),
                                " ms without a collective finishing (ZRT_COMM_TIMEOUT_S sets "
                                "the limit)"));
    }
    if (done_blocks) continue;
    if (now < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min<std::chrono::microseconds>(pause * 2, kLongestPoll);
  }
}

void CommWatchdog::wait(const Event& event, const char* what) const {
  // A CPU event wakes its waiter as it completes; a CUDA one is polled.
  const bool blocks = event.device().is_cpu();
  wait_until([&] { return blocks ? event.wait_for(kLongestPoll) : event.query(); }, what, blocks);
  event.synchronize();  // complete: returns at once, or reports the stream's failure
}

void CommWatchdog::synchronize(Stream stream, const char* what) const {
  if (stream.is_cpu()) {
    CpuStream* queue = stream.cpu_queue();
    if (queue == nullptr) return;           // the default CPU stream: everything issued is done
    if (queue->on_stream_thread()) return;  // already in order, as CpuStream::synchronize
    // A CPU event wakes its waiter as it completes: no poll interval is added to the wait.
    Event issued(Device::cpu());
    issued.record(stream);
    wait_until([&] { return issued.wait_for(kLongestPoll); }, what, /*done_blocks=*/true);
    if (std::exception_ptr failure = queue->failure()) CpuStream::rethrow(failure, "CPU stream");
    return;
  }
  Event issued(stream.device());
  issued.record(stream);
  wait_until([&] { return issued.query(); }, what);
  issued.synchronize();  // complete: returns at once, or reports the device's error
}

void CommWatchdog::fail(const char* what, const std::string& why) const {
  // The rank's oldest unfinished collective, on a watched group if one is
  // unfinished there, else on any; failing both, the last one issued on a
  // watched group (on CUDA an entry is done once enqueued).
  std::set<std::string> watched;
  for (const Communicator* g : groups_) watched.insert(g->name());
  const FlightEntry* oldest_watched = nullptr;
  const FlightEntry* oldest_any = nullptr;
  const FlightEntry* last_watched = nullptr;
  std::vector<FlightEntry> entries;
  const std::vector<const FlightRecorder*> recorders = rings(groups_);
  for (const FlightRecorder* f : recorders) {
    std::vector<FlightEntry> more = f->entries();
    entries.insert(entries.end(), std::make_move_iterator(more.begin()),
                   std::make_move_iterator(more.end()));
  }
  for (const FlightEntry& e : entries) {
    const bool on_watched = watched.count(e.group) > 0;
    if (unfinished(e)) {
      if (oldest_any == nullptr || e.issued_s < oldest_any->issued_s) oldest_any = &e;
      if (on_watched && (oldest_watched == nullptr || e.issued_s < oldest_watched->issued_s))
        oldest_watched = &e;
    }
    if (on_watched && (last_watched == nullptr || e.issued_s >= last_watched->issued_s))
      last_watched = &e;
  }
  const FlightEntry* culprit = oldest_watched ? oldest_watched
                               : oldest_any   ? oldest_any
                                              : last_watched;

  std::string aborted;
  for (const Communicator* g : groups_)
    aborted += detail::concat(aborted.empty() ? "" : ", ", g->name());
  const Communicator& first = *groups_.front();
  std::string head;
  if (culprit == nullptr) {
    head = detail::concat(what, " on group ", first.name(), " (rank ", first.rank(), " of ",
                          first.size(), "; no collective recorded)");
  } else {
    const auto group = std::find_if(groups_.begin(), groups_.end(), [&](const Communicator* g) {
      return g->name() == culprit->group;
    });
    const std::string rank =
        group != groups_.end()
            ? detail::concat("rank ", (*group)->rank(), " of ", (*group)->size())
            : detail::concat("world rank ",
                             recorders.empty() ? first.rank() : recorders.front()->rank());
    head = detail::concat(culprit->op, " #", culprit->seq, " on group ", culprit->group, " (", rank,
                          ")");
    if (!unfinished(*culprit))
      head += " (the last collective enqueued; its completion on the device is not tracked)";
  }
  const std::string message =
      detail::concat(head, ": ", why, " (watchdog; aborted group(s) ", aborted, ")");
  for (Communicator* g : groups_) g->abort(message);
  ZRT_THROW(CommError, message);
}

}  // namespace zrt
