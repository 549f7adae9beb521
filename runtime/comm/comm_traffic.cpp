// See Note [Bytes on the link] in comm_traffic.h.
#include "zrt/runtime/comm/comm_traffic.h"

#include "zrt/runtime/error.h"

namespace zrt {

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::all_to_all:
      return "all_to_all";
  }
  return "?";
}

LinkBytes ring_link_bytes(CollectiveKind kind, std::int64_t numel, std::size_t itemsize, int size,
                          int rank, int root) {
  ZRT_CHECK_ARG(size >= 1 && rank >= 0 && rank < size && root >= 0 && root < size && numel >= 0,
                "ring_link_bytes: rank ", rank, " and root ", root, " of ", size, " ranks, ", numel,
                " elements");
  if (size == 1) return {};
  const auto p = static_cast<std::uint64_t>(size);
  const auto e = static_cast<std::uint64_t>(numel);
  const std::uint64_t whole = e * itemsize;
  switch (kind) {
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: {
      const std::uint64_t moved = (p - 1) * (whole / p);  // whole is p equal chunks
      return {moved, moved};
    }
    case CollectiveKind::all_reduce: {
      // Chunk c's bytes: floor(e/p) elements, one more for c < e mod p.
      auto chunk = [&](int c) {
        const auto k = static_cast<std::uint64_t>((c % size + size) % size);
        return (e / p + (k < e % p ? 1 : 0)) * itemsize;
      };
      return {2 * whole - chunk(rank) - chunk(rank + 1), 2 * whole - chunk(rank - 1) - chunk(rank)};
    }
    case CollectiveKind::broadcast: {
      const int last = (root + size - 1) % size;  // the chain's tail
      return {rank == last ? 0 : whole, rank == root ? 0 : whole};
    }
  }
  return {};
}

KindTraffic TrafficCounts::total() const {
  KindTraffic t;
  for (const KindTraffic& k : kinds) {
    t.calls += k.calls;
    t.sent += k.sent;
    t.received += k.received;
  }
  return t;
}

TrafficCounts& TrafficCounts::operator+=(const TrafficCounts& o) {
  for (std::size_t i = 0; i < kCollectiveKinds; ++i) {
    kinds[i].calls += o.kinds[i].calls;
    kinds[i].sent += o.kinds[i].sent;
    kinds[i].received += o.kinds[i].received;
  }
  return *this;
}

TrafficCounts& TrafficCounts::operator-=(const TrafficCounts& o) {
  for (std::size_t i = 0; i < kCollectiveKinds; ++i) {
    kinds[i].calls -= o.kinds[i].calls;
    kinds[i].sent -= o.kinds[i].sent;
    kinds[i].received -= o.kinds[i].received;
  }
  return *this;
}

void CommTraffic::add(CollectiveKind kind, LinkBytes bytes) {
  Counters& c = kinds_[static_cast<std::size_t>(kind)];
  c.calls.fetch_add(1, std::memory_order_relaxed);
  c.sent.fetch_add(bytes.sent, std::memory_order_relaxed);
  c.received.fetch_add(bytes.received, std::memory_order_relaxed);
}

TrafficCounts CommTraffic::read() const {
  TrafficCounts t;
  for (std::size_t i = 0; i < kCollectiveKinds; ++i) {
    t.kinds[i].calls = kinds_[i].calls.load(std::memory_order_relaxed);
    t.kinds[i].sent = kinds_[i].sent.load(std::memory_order_relaxed);
    t.kinds[i].received = kinds_[i].received.load(std::memory_order_relaxed);
  }
  return t;
}

}  // namespace zrt
