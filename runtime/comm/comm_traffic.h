// What a rank's collectives put on its link: the bytes each tensor
// collective sends and receives under a ring algorithm, counted per kind
// when the collective is issued.
//
// Note [Bytes on the link]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A collective's cost on a link is the bytes that cross it, not its payload:
// an all-gather of an N-byte output on p ranks moves (p-1)/p·N through each
// rank's link, an all-reduce about twice that. zrt counts, for each rank and
// each tensor collective, the bytes that rank sends and receives under the
// ring algorithms NCCL uses for large messages, computed exactly from the
// sizes the collective was issued with (not measured from a backend, which
// may run another algorithm: MPI's, or the local backend's shared memory).
// With p ranks, rank r, and the collective's larger buffer of N bytes
// (all-gather: the output; reduce-scatter and all-to-all: the input;
// all-reduce and broadcast: the tensor) of E elements:
//  - all-gather, reduce-scatter: each rank's chunk is n = N/p bytes; the
//    ring passes p-1 chunks on and takes p-1 in: sent = received = (p-1)·n.
//  - all-to-all (no ring: each pair exchanges its chunks directly): a rank
//    sends its p-1 chunks for the others and receives theirs for it, so
//    again sent = received = (p-1)·n.
//  - all-reduce: a reduce-scatter then an all-gather over p chunks of
//    elements, chunk c holding floor(E/p) elements, plus one for c < E mod p
//    (c_k: chunk k's bytes). Rank r ends the reduce-scatter owning chunk r,
//    so it sends every chunk but r and receives every chunk but r-1; in the
//    all-gather it sends every chunk but r+1 and receives every chunk but r
//    (indices mod p): sent = 2N - c_r - c_(r+1), received = 2N - c_(r-1) - c_r.
//    For E divisible by p both are 2(p-1)/p·N.
//  - broadcast from root t: a pipelined chain t, t+1, ..., t-1 (mod p); each
//    rank but the chain's last sends N, each but the root receives N.
//  - a group of one rank moves nothing.
// barrier, split and all_gather_bytes (host metadata) are not counted. The
// counters of a rank are shared by the groups split from its world (as its
// flight recorder is), so one read covers the ZeRO groups; a step's traffic
// is the difference of two reads. The link model (Note [Link model]) takes
// max(sent, received) as the bytes a full-duplex link carries.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace zrt {

// The tensor collectives, in the order of the counters.
enum class CollectiveKind { all_gather, reduce_scatter, all_reduce, broadcast, all_to_all };
inline constexpr std::size_t kCollectiveKinds = 5;
const char* collective_kind_name(CollectiveKind kind);  // "all_gather", ...

// One rank's bytes through its link for one collective (Note [Bytes on the link]).
struct LinkBytes {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
};

// The bytes rank `rank` of `size` sends and receives for a collective of
// `kind` whose larger buffer has `numel` elements of `itemsize` bytes
// (broadcast: from `root`).
LinkBytes ring_link_bytes(CollectiveKind kind, std::int64_t numel, std::size_t itemsize, int size,
                          int rank, int root = 0);

// The counts of one kind of collective.
struct KindTraffic {
  std::uint64_t calls = 0;
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
};

// A snapshot of a rank's counters, or the difference of two.
struct TrafficCounts {
  std::array<KindTraffic, kCollectiveKinds> kinds{};

  const KindTraffic& operator[](CollectiveKind k) const {
    return kinds[static_cast<std::size_t>(k)];
  }
  // Over every kind.
  KindTraffic total() const;
  TrafficCounts& operator+=(const TrafficCounts& o);
  TrafficCounts& operator-=(const TrafficCounts& o);
  friend TrafficCounts operator-(TrafficCounts a, const TrafficCounts& b) { return a -= b; }
};

// A rank's counters: added to by the thread that issues a collective, read
// from any thread.
class CommTraffic {
 public:
  void add(CollectiveKind kind, LinkBytes bytes);
  TrafficCounts read() const;

 private:
  struct Counters {
    std::atomic<std::uint64_t> calls{0}, sent{0}, received{0};
  };
  std::array<Counters, kCollectiveKinds> kinds_;
};

}  // namespace zrt
