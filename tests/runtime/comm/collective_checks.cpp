#include "tests/runtime/comm/collective_checks.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "zrt/runtime/comm/zero_groups.h"
#include "zrt/runtime/error.h"

namespace zrt::test {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A value no collective here produces (inputs are in [1, 11], sums <= 44).
constexpr double kPoison = 123.0;

Tensor input_tensor(std::uint64_t seed, int rank, std::int64_t n, DType dtype, Device device) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = input_value(seed, rank, i);
  return Tensor::from_doubles(v, dtype, device);
}

// The reduction of every rank's element i, as the backend must compute it
// (avg: integer division for integer dtypes; floating avg compared with a
// tolerance of the dtype's rounding).
double expected_reduction(std::uint64_t seed, int size, std::int64_t i, ReduceOp op, DType dtype) {
  double acc = input_value(seed, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = input_value(seed, r, i);
    if (op == ReduceOp::max)
      acc = std::max(acc, v);
    else if (op == ReduceOp::min)
      acc = std::min(acc, v);
    else
      acc += v;
  }
  if (op == ReduceOp::avg) acc = is_floating(dtype) ? acc / size : std::trunc(acc / size);
  return acc;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return 1.0 / 128;
    case DType::f16:
      return 1.0 / 1024;
    case DType::f32:
      return 1e-6;
    case DType::f64:
      return 1e-14;
    default:
      return 0.0;
  }
}

// Compares `got` with expected(i) for every element; throws naming the first miss.
template <class Expected>
void expect_elements(const Communicator& comm, const char* what, const Tensor& got,
                     const Expected& expected, double rel_tol = 0.0) {
  const std::vector<double> v = got.to_doubles();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double e = expected(static_cast<std::int64_t>(i));
    if (!(std::fabs(v[i] - e) <= rel_tol * std::fabs(e)))  // a NaN is a miss too
      throw std::runtime_error(detail::concat(what, " on ", comm.name(), " rank ", comm.rank(),
                                              " of ", comm.size(), ", ", got.str(), ": element ", i,
                                              " is ", v[i], ", expected ", e));
  }
}

void expect(bool cond, const std::string& msg) {
  if (!cond) throw std::runtime_error(msg);
}

}  // namespace

double input_value(std::uint64_t seed, int rank, std::int64_t i) {
  return 1.0 + static_cast<double>(mix(seed ^ mix(static_cast<std::uint64_t>(rank) * 1000003ULL +
                                                  static_cast<std::uint64_t>(i))) %
                                   11);
}

void check_all_gather(Communicator& comm, DType dtype, std::int64_t n, std::uint64_t seed,
                      Device device) {
  const int size = comm.size();
  Tensor in = input_tensor(seed, comm.rank(), n, dtype, device);
  Tensor out = Tensor::full({size * n}, kPoison, dtype, device);
  comm.all_gather_into_tensor(out, in);
  auto expected = [&](std::int64_t i) { return input_value(seed, static_cast<int>(i / n), i % n); };
  expect_elements(comm, "all_gather_into_tensor", out, expected);
  // In place: this rank's chunk of the output is the input.
  Tensor whole = Tensor::full({size * n}, kPoison, dtype, device);
  Tensor mine = whole.slice(comm.rank() * n, n);
  mine.copy_(in);
  comm.all_gather_into_tensor(whole, mine);
  expect_elements(comm, "in-place all_gather_into_tensor", whole, expected);
}

void check_reduce_scatter(Communicator& comm, DType dtype, std::int64_t n, ReduceOp op,
                          std::uint64_t seed, Device device) {
  const int size = comm.size(), rank = comm.rank();
  Tensor in = input_tensor(seed, rank, size * n, dtype, device);
  Tensor out = Tensor::full({n}, kPoison, dtype, device);
  comm.reduce_scatter_tensor(out, in, op);
  auto expected = [&](std::int64_t i) {
    return expected_reduction(seed, size, rank * n + i, op, dtype);
  };
  const double tol = op == ReduceOp::avg ? tolerance(dtype) : 0.0;
  expect_elements(comm, reduce_op_name(op), out, expected, tol);
  // In place: the output is this rank's chunk of the input.
  Tensor in2 = input_tensor(seed, rank, size * n, dtype, device);
  comm.reduce_scatter_tensor(in2.slice(rank * n, n), in2, op);
  expect_elements(comm, "in-place reduce_scatter_tensor", in2.slice(rank * n, n), expected, tol);
}

void check_all_to_all(Communicator& comm, DType dtype, std::int64_t n, std::uint64_t seed,
                      Device device) {
  const int size = comm.size(), rank = comm.rank();
  Tensor in = input_tensor(seed, rank, size * n, dtype, device);
  Tensor out = Tensor::full({size * n}, kPoison, dtype, device);
  comm.all_to_all(out, in);
  expect_elements(comm, "all_to_all", out, [&](std::int64_t i) {
    return input_value(seed, static_cast<int>(i / n), rank * n + i % n);
  });
  bool refused = false;
  try {
    comm.all_to_all(in, in);
  } catch (const InvalidArgument&) {
    refused = true;
  }
  expect(refused || n == 0, "all_to_all: an output overlapping the input was not refused");
}

void check_all_reduce(Communicator& comm, DType dtype, std::int64_t n, ReduceOp op,
                      std::uint64_t seed, Device device) {
  Tensor t = input_tensor(seed, comm.rank(), n, dtype, device);
  comm.all_reduce(t, op);
  expect_elements(
      comm, reduce_op_name(op), t,
      [&](std::int64_t i) { return expected_reduction(seed, comm.size(), i, op, dtype); },
      op == ReduceOp::avg ? tolerance(dtype) : 0.0);
}

void check_broadcast(Communicator& comm, DType dtype, std::int64_t n, int root, std::uint64_t seed,
                     Device device) {
  Tensor t = comm.rank() == root ? input_tensor(seed, root, n, dtype, device)
                                 : Tensor::full({n}, kPoison, dtype, device);
  comm.broadcast(t, root);
  expect_elements(comm, "broadcast", t, [&](std::int64_t i) { return input_value(seed, root, i); });
}

void check_all_gather_bytes(Communicator& comm, std::uint64_t seed) {
  auto bytes_of_rank = [&](int r) {
    // Rank 1 sends nothing; a world of one still moves bytes.
    std::vector<std::byte> b(static_cast<std::size_t>(r == 1 ? 0 : 3 * (r + 1)));
    for (std::size_t i = 0; i < b.size(); ++i)
      b[i] = static_cast<std::byte>(input_value(seed, r, static_cast<std::int64_t>(i)));
    return b;
  };
  const auto all = comm.all_gather_bytes(bytes_of_rank(comm.rank()));
  expect(static_cast<int>(all.size()) == comm.size(), "all_gather_bytes: wrong number of ranks");
  for (int r = 0; r < comm.size(); ++r)
    expect(all[r] == bytes_of_rank(r), detail::concat("all_gather_bytes on rank ", comm.rank(),
                                                      ": rank ", r, "'s bytes differ"));
}

void check_all_collectives(Communicator& comm, DType dtype, std::int64_t n, std::uint64_t seed,
                           Device device) {
  check_all_gather(comm, dtype, n, seed, device);
  check_all_to_all(comm, dtype, n, seed + 4, device);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
    check_reduce_scatter(comm, dtype, n, op, seed + 1, device);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min})
    check_all_reduce(comm, dtype, n, op, seed + 2, device);
  for (int root = 0; root < comm.size(); ++root)
    check_broadcast(comm, dtype, n, root, seed + 3, device);
}

void check_split(Communicator& comm, std::uint64_t seed, Device device) {
  const int color = comm.rank() % 2;
  // Key reverses the order inside each group.
  auto child = comm.split(color, -comm.rank());
  const int members = (comm.size() - color + 1) / 2;
  expect(child->size() == members, detail::concat("split: group ", child->name(), " has size ",
                                                  child->size(), ", expected ", members));
  expect(child->rank() == members - 1 - comm.rank() / 2,
         detail::concat("split: parent rank ", comm.rank(), " got child rank ", child->rank()));
  expect(child->name() == detail::concat(comm.name(), "/split(", color, ")"),
         "split: unexpected child name " + child->name());
  expect(child->timeout() == comm.timeout(), "split: the child did not inherit the timeout");
  // The sum over the child of the parent ranks.
  Tensor t = Tensor::from_doubles({static_cast<double>(comm.rank())}, DType::i64, device);
  child->all_reduce(t, ReduceOp::sum);
  double want = 0;
  for (int r = color; r < comm.size(); r += 2) want += r;
  expect(t.item(0) == want,
         detail::concat("split: sum over ", child->name(), " is ", t.item(0), ", expected ", want));
  check_all_collectives(*child, DType::f32, 7, seed, device);
  // Collectives on the parent still work after the split.
  check_all_reduce(comm, DType::i32, 3, ReduceOp::sum, seed, device);
}

void check_zero_groups(const CommPtr& world, int zero3_size, std::uint64_t seed, Device device) {
  const int w = world->size(), r = world->rank();
  ZeroGroups g = make_zero_groups(world, zero3_size);
  expect(g.zero1 == world, "zero groups: zero1 is not the world");
  expect(g.zero3->size() == zero3_size && g.zero3->rank() == r % zero3_size,
         detail::concat("zero groups: zero3 rank/size ", g.zero3->rank(), "/", g.zero3->size()));
  expect(
      g.replica->size() == w / zero3_size && g.replica->rank() == r / zero3_size,
      detail::concat("zero groups: replica rank/size ", g.replica->rank(), "/", g.replica->size()));
  // Gathering world ranks tells who is in each group.
  auto members = [&](Communicator& c) {
    Tensor in = Tensor::from_doubles({static_cast<double>(r)}, DType::i32, device);
    Tensor out = Tensor::full({c.size()}, -1, DType::i32, device);
    c.all_gather_into_tensor(out, in);
    return out.to_doubles();
  };
  const auto z3 = members(*g.zero3);
  for (int i = 0; i < zero3_size; ++i)
    expect(z3[i] == (r / zero3_size) * zero3_size + i,
           detail::concat("zero groups: zero3 member ", i, " of rank ", r, " is ", z3[i]));
  const auto rep = members(*g.replica);
  for (int i = 0; i < w / zero3_size; ++i)
    expect(rep[i] == i * zero3_size + r % zero3_size,
           detail::concat("zero groups: replica member ", i, " of rank ", r, " is ", rep[i]));
  check_reduce_scatter(*g.zero3, DType::bf16, 5, ReduceOp::avg, seed, device);
  check_all_gather(*g.replica, DType::f16, 3, seed, device);
}

namespace {

// The counters' change over `call` must be one `kind` call of `sent` and
// `received` bytes, and nothing of any other kind.
template <class F>
void expect_traffic(Communicator& comm, const char* what, CollectiveKind kind, std::uint64_t sent,
                    std::uint64_t received, F&& call) {
  const TrafficCounts before = comm.traffic()->read();
  call();
  const TrafficCounts d = comm.traffic()->read() - before;
  for (std::size_t k = 0; k < kCollectiveKinds; ++k) {
    const auto kk = static_cast<CollectiveKind>(k);
    const KindTraffic want = kk == kind ? KindTraffic{1, sent, received} : KindTraffic{0, 0, 0};
    expect(d[kk].calls == want.calls && d[kk].sent == want.sent && d[kk].received == want.received,
           detail::concat(what, " on ", comm.name(), " rank ", comm.rank(), " of ", comm.size(),
                          ": ", collective_kind_name(kk), " counted ", d[kk].calls, " call(s), ",
                          d[kk].sent, " B sent, ", d[kk].received, " B received; expected ",
                          want.calls, ", ", want.sent, ", ", want.received));
  }
}

}  // namespace

void check_traffic(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  const auto up = static_cast<std::uint64_t>(p - 1);
  // all-gather of 5 bf16 per rank: the ring passes p-1 chunks of 10 bytes each way.
  {
    Tensor in = Tensor::zeros({5}, DType::bf16), out = Tensor::zeros({5 * p}, DType::bf16);
    expect_traffic(comm, "all_gather", CollectiveKind::all_gather, up * 10, up * 10,
                   [&] { comm.all_gather_into_tensor(out, in); });
  }
  // reduce-scatter to 3 f32 per rank: p-1 chunks of 12 bytes.
  {
    Tensor in = Tensor::zeros({3 * p}, DType::f32), out = Tensor::zeros({3}, DType::f32);
    expect_traffic(comm, "reduce_scatter", CollectiveKind::reduce_scatter, up * 12, up * 12,
                   [&] { comm.reduce_scatter_tensor(out, in, ReduceOp::sum); });
  }
  // all-reduce of 7 f32 (28 bytes), worked out by hand for 1-4 ranks: the
  // chunks are 7 elements as even as they go, the first ones larger (3
  // ranks: 12, 8, 8 bytes). Rank r sends 2·28 less chunks r and r+1 and
  // receives 2·28 less chunks r-1 and r: with 3 ranks, rank 1 sends
  // 56-8-8 = 40 and receives 56-12-8 = 36.
  if (p <= 4) {
    const std::uint64_t by_hand[4][4][2] = {{{0, 0}},
                                            {{28, 28}, {28, 28}},
                                            {{36, 36}, {40, 36}, {36, 40}},
                                            {{40, 44}, {40, 40}, {44, 40}, {44, 44}}};
    Tensor t = Tensor::zeros({7}, DType::f32);
    expect_traffic(comm, "all_reduce", CollectiveKind::all_reduce, by_hand[p - 1][r][0],
                   by_hand[p - 1][r][1], [&] { comm.all_reduce(t, ReduceOp::sum); });
  }
  // broadcast of 3 f64 (24 bytes) from every root: the chain root, root+1,
  // ... sends from all but its last rank and delivers to all but the root.
  for (int root = 0; root < p; ++root) {
    Tensor t = Tensor::zeros({3}, DType::f64);
    const bool last = p > 1 && r == (root + p - 1) % p;
    expect_traffic(comm, "broadcast", CollectiveKind::broadcast, p > 1 && !last ? 24 : 0,
                   p > 1 && r != root ? 24 : 0, [&] { comm.broadcast(t, root); });
  }
  // Host metadata and barriers are no tensor traffic.
  {
    const TrafficCounts before = comm.traffic()->read();
    comm.barrier();
    const std::byte b{1};
    (void)comm.all_gather_bytes(std::span(&b, 1));
    expect(comm.traffic()->read().total().calls == before.total().calls,
           "barrier or all_gather_bytes was counted as tensor traffic");
  }
  // A group split afterwards counts into the same counters.
  {
    auto half = comm.split(r % 2, r);
    Tensor in = Tensor::zeros({1}, DType::f32), out = Tensor::zeros({half->size()}, DType::f32);
    const auto hp = static_cast<std::uint64_t>(half->size() - 1);
    expect_traffic(comm, "all_gather on a split group", CollectiveKind::all_gather, hp * 4, hp * 4,
                   [&] { half->all_gather_into_tensor(out, in); });
  }
}

void check_mismatch_is_named(Communicator& comm, Mismatch what, std::uint64_t seed) {
  const int p = comm.size(), odd = static_cast<int>(mix(seed) % static_cast<std::uint64_t>(p));
  const bool mine = comm.rank() == odd;
  const std::int64_t n = 2 * static_cast<std::int64_t>(mix(seed + 1) % 40) + 3;
  const std::string ps = std::to_string(p);
  auto values = [](std::int64_t count, DType dtype) {
    return detail::concat(count, " ", dtype_name(dtype), " values (",
                          count * static_cast<std::int64_t>(dtype_size(dtype)), " bytes)");
  };
  // Each side's collective and how the message must name it.
  std::function<void()> call;
  std::string expected;
  switch (what) {
    case Mismatch::op:  // all_gather vs all_reduce of the same elements
    case Mismatch::count: {
      const std::int64_t k = what == Mismatch::count && mine ? n + 2 : n;
      if (what == Mismatch::op && mine) {
        call = [&comm, n] {
          Tensor t = Tensor::zeros({n}, DType::f32);
          comm.all_reduce(t, ReduceOp::max);
        };
        expected = "all_reduce (max) of " + values(n, DType::f32);
      } else {
        call = [&comm, k, p] {
          Tensor in = Tensor::zeros({k}, DType::f32), out = Tensor::zeros({k * p}, DType::f32);
          comm.all_gather_into_tensor(out, in);
        };
        expected = "all_gather of " + values(k, DType::f32);
      }
      break;
    }
    case Mismatch::op_barrier:
      if (mine) {
        call = [&comm] { comm.barrier(); };
        expected = "barrier";
      } else {
        call = [&comm, n] {
          Tensor t = Tensor::zeros({n}, DType::f64);
          comm.broadcast(t, 0);
        };
        expected = "broadcast from rank 0 of " + values(n, DType::f64);
      }
      break;
    case Mismatch::dtype: {
      const DType dtype = mine ? DType::bf16 : DType::f32;
      call = [&comm, n, dtype] {
        Tensor t = Tensor::zeros({n}, dtype);
        comm.all_reduce(t, ReduceOp::sum);
      };
      expected = "all_reduce (sum) of " + values(n, dtype);
      break;
    }
    case Mismatch::root: {
      const int root = mine ? p - 1 : 0;
      call = [&comm, n, root] {
        Tensor t = Tensor::zeros({n}, DType::i32);
        comm.broadcast(t, root);
      };
      expected = detail::concat("broadcast from rank ", root, " of ", values(n, DType::i32));
      break;
    }
    case Mismatch::reduce_op: {
      const ReduceOp rop = mine ? ReduceOp::avg : ReduceOp::sum;
      call = [&comm, n, p, rop] {
        Tensor in = Tensor::zeros({n * p}, DType::f32), out = Tensor::zeros({n}, DType::f32);
        comm.reduce_scatter_tensor(out, in, rop);
      };
      expected = detail::concat("reduce_scatter (", reduce_op_name(rop), ") of ",
                                values(n * p, DType::f32));
      break;
    }
  }
  const std::string label = mine ? "test('odd one')" : "test('the others')";
  // What this side must find in the message: "rank <odd> issued <it>" or
  // " issued <it>" after the others' ranks.
  const std::string mine_text =
      (mine ? detail::concat("rank ", odd, " issued ") : std::string(" issued ")) + expected +
      " in " + label;
  const std::uint64_t seq = comm.sequence_number() + 1;
  try {
    FlightRecorder::Caller caller(*comm.flight_recorder(), label);
    call();
    throw std::runtime_error(detail::concat("rank ", comm.rank(), " of ", p,
                                            ": a mismatched collective returned (", expected, ")"));
  } catch (const CommError& e) {
    const std::string m = e.what();
    const std::string head =
        detail::concat("collective #", seq, " of group '", comm.name(), "' does not match");
    expect(m.rfind(head, 0) == 0 && m.find(mine_text) != std::string::npos &&
               m.find(detail::concat("rank ", odd, " issued ")) != std::string::npos &&
               m.find("every rank must call the same collectives in the same order") !=
                   std::string::npos,
           detail::concat("rank ", comm.rank(), " of ", p, ": the error does not name '", head,
                          "' and '", mine_text, "': ", m));
  }
  // The group goes on: a matching collective moves its data.
  check_all_reduce(comm, DType::f32, n, ReduceOp::sum, seed);
}

}  // namespace zrt::test
