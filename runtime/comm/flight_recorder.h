// The flight recorder: each rank's last collectives, written when a
// collective fails, and the report that reads every rank's record and says
// which rank diverged.
//
// Note [Flight recorder]
// ~~~~~~~~~~~~~~~~~~~~~~
// A hang or a collective error shows up on the ranks that wait, not on the
// rank that caused it, and a timeout alone cannot say which one that was.
// Every communicator of a rank (the world and the groups split from it)
// shares one ring of that rank's last N collectives (N from
// ZRT_FLIGHT_RECORDER_ENTRIES, default 256): the op, the group, its sequence
// number on that group, the bytes, the state (issued: queued on a stream;
// running; done; failed) with wall-clock times of issue, start and end, and
// the caller's label where a FlightRecorder::Caller gives one (ZeroModule's
// full_param and full_params do; the contract's mismatch error names it).
// Recording is a few words under a mutex per collective, always on. When a
// run fails, each rank writes its ring as flight-rank-R.json (zrt-train:
// into ZRT_FLIGHT_RECORDER_DIR, else beside --trace, else the working
// directory), and one rank reads every rank's file and reports where each
// rank is: the first collective of its ring that did not finish (or the
// last one it finished). Ranks in the same collective are one line;
// the smallest groups of ranks come first, since a rank that skipped,
// reordered or repeated a collective is alone where the others are not:
//   rank 3 is in all_gather #57 on world/zero3(1); ranks 0-2 are in
//   reduce_scatter #58 on world
// On a CUDA stream an entry is done once NCCL has enqueued it: the device's
// completion is not tracked (yet), so a collective hung on the device shows
// as the first one after it that runs on the calling thread, and the comm
// watchdog names the last one enqueued (Note [Comm watchdog]).
// When every rank is in the same collective, the one that issued it last
// is named with how late it came (the rank that stalled before it). A rank
// with no file wrote none in time: it stalled outside any collective, or its
// process is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace zrt {

struct FlightEntry {
  std::uint64_t seq = 0;  // on its group
  std::string op;         // "all_gather", "barrier", ...
  std::string group;      // "world", "world/zero3(1)"
  std::uint64_t bytes = 0;
  std::string state;                                // issued | running | done | failed
  double issued_s = 0, started_s = 0, ended_s = 0;  // seconds since the epoch; 0: not yet
  std::string
      caller;  // the label of the call that issued it (FlightRecorder::Caller); may be empty
};

class FlightRecorder {
 public:
  // `capacity` entries (0: ZRT_FLIGHT_RECORDER_ENTRIES, else 256) of world rank `rank`.
  explicit FlightRecorder(int rank, std::size_t capacity = 0);
  int rank() const { return rank_; }
  std::size_t capacity() const { return capacity_; }

  // Labels the collectives this rank issues while it lives with the call
  // that issues them ("full_param('fc1.weight')"): in the ring's entries and
  // in the error when ranks issue different collectives (Note [Collective
  // contract]). Nested labels: the innermost names the call; the previous
  // one returns at its end.
  class Caller {
   public:
    Caller(FlightRecorder& recorder, std::string label);
    ~Caller();
    Caller(const Caller&) = delete;
    Caller& operator=(const Caller&) = delete;

   private:
    FlightRecorder& recorder_;
    std::string previous_;
  };
  std::string caller() const;
  // The label into `out` (cut to fit, NUL-terminated), without allocating.
  void copy_caller(std::span<char> out) const;

  // Names what the tensor collectives issued while it lives move (a flat
  // parameter's name): ranks that gather or reduce different ones of equal
  // size then disagree (Note [Collective contract]) instead of exchanging
  // each other's data. Nested: the innermost names it.
  class Subject {
   public:
    Subject(FlightRecorder& recorder, std::string name);
    ~Subject();
    Subject(const Subject&) = delete;
    Subject& operator=(const Subject&) = delete;

   private:
    FlightRecorder& recorder_;
    std::string previous_;
  };
  // The subject's hash (0: none) and name (cut to fit, NUL-terminated).
  void copy_subject(std::uint64_t& id, std::span<char> name) const;

  // A new entry, issued now; its id for the calls below.
  std::uint64_t issued(const char* op, const std::string& group, std::uint64_t seq,
                       std::uint64_t bytes);
  void started(std::uint64_t id);
  void ended(std::uint64_t id, bool ok);

  // Entries ended so far (done or failed), including those the ring has
  // dropped: a rank's progress (Note [Comm watchdog]).
  std::uint64_t ended_count() const;
  // The ring, oldest first.
  std::vector<FlightEntry> entries() const;
  // {"rank": R, "entries": [...]}.
  std::string json() const;
  // Writes json() to DIR/flight-rank-R.json (ResourceError naming the path
  // when it cannot) and returns the path.
  std::string write(const std::string& dir) const;

 private:
  FlightEntry* find(std::uint64_t id);
  int rank_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::deque<FlightEntry> ring_;
  std::uint64_t first_id_ = 0;  // id of ring_.front()
  std::uint64_t ended_ = 0;
  std::string caller_;
  std::string subject_;
};

// "0-2, 5" from sorted ranks.
std::string rank_ranges(const std::vector<int>& ranks);

// ZRT_FLIGHT_RECORDER_ENTRIES (a whole number from 1 to 1e6; InvalidArgument
// otherwise), else 256.
std::size_t default_flight_recorder_entries();

// Note [Flight recorder]: where each rank of a world of `world_size` is,
// from the rank files under `dir`, waiting up to `wait` for missing ones.
std::string flight_report(const std::string& dir, int world_size, std::chrono::milliseconds wait);
// The same from rings already read, by rank (an empty ring: no record).
std::string flight_report(const std::vector<std::vector<FlightEntry>>& by_rank,
                          const std::vector<bool>& present);

}  // namespace zrt
