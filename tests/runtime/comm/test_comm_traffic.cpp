// Bytes on the link (Note [Bytes on the link]) and the link model (Note
// [Link model]) on the local backend: the ring formulas against a step-by-step
// ring, the counters by hand for 1-4 ranks, the model's time, its settings'
// errors, and collectives held at least the modelled time with unchanged
// results.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/runtime/comm/collective_checks.h"
#include "tests/support/expect_throw.h"
#include "tests/support/test_seed.h"
#include "zrt/runtime/comm/comm_traffic.h"
#include "zrt/runtime/comm/link_model.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/stream.h"

using namespace zrt;
using namespace std::chrono_literals;

namespace {

void on_ranks(int n, const std::function<void(const CommPtr&)>& fn) {
  try {
    run_local_ranks(n, fn, 20s);
  } catch (const std::exception& e) {
    BOOST_ERROR("world of " << n << ": " << e.what());
  }
}

// What a ring moves, simulated step by step: per rank, bytes sent and received.
struct Simulated {
  std::vector<LinkBytes> ranks;
  explicit Simulated(int p) : ranks(static_cast<std::size_t>(p)) {}
  void send(int from, int to, std::uint64_t bytes) {
    ranks[static_cast<std::size_t>(from)].sent += bytes;
    ranks[static_cast<std::size_t>(to)].received += bytes;
  }
};

Simulated simulate(CollectiveKind kind, std::int64_t numel, std::size_t itemsize, int p, int root) {
  Simulated s(p);
  if (p == 1) return s;
  // Chunk c's bytes: p chunks as even as they go, the first ones larger.
  std::vector<std::uint64_t> chunk(static_cast<std::size_t>(p));
  for (int c = 0; c < p; ++c)
    chunk[static_cast<std::size_t>(c)] =
        static_cast<std::uint64_t>(numel / p + (c < numel % p ? 1 : 0)) * itemsize;
  auto at = [&](int c) { return chunk[static_cast<std::size_t>(((c % p) + p) % p)]; };
  auto next = [&](int r) { return (r + 1) % p; };
  // Ring reduce-scatter ending with rank r owning chunk r: at step k rank r
  // passes its partial sum of chunk r-1-k on.
  auto reduce_scatter = [&] {
    for (int k = 0; k < p - 1; ++k)
      for (int r = 0; r < p; ++r) s.send(r, next(r), at(r - 1 - k));
  };
  // Ring all-gather from rank r holding chunk r: at step k it passes chunk r-k on.
  auto all_gather = [&] {
    for (int k = 0; k < p - 1; ++k)
      for (int r = 0; r < p; ++r) s.send(r, next(r), at(r - k));
  };
  switch (kind) {
    case CollectiveKind::all_gather:
      all_gather();
      break;
    case CollectiveKind::reduce_scatter:
      reduce_scatter();
      break;
    case CollectiveKind::all_reduce:
      reduce_scatter();
      all_gather();
      break;
    case CollectiveKind::broadcast:
      for (int i = 0; i < p - 1; ++i)
        s.send((root + i) % p, (root + i + 1) % p, static_cast<std::uint64_t>(numel) * itemsize);
      break;
    case CollectiveKind::all_to_all:  // rank r's chunk t goes straight to rank t
      for (int r = 0; r < p; ++r)
        for (int t = 0; t < p; ++t)
          if (t != r) s.send(r, t, at(t));
      break;
  }
  return s;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

template <class F>
void expect_invalid(F&& call, const std::string& needle) {
  test::expect_throw<InvalidArgument>(std::forward<F>(call), needle);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_traffic)

BOOST_AUTO_TEST_CASE(ring_bytes_match_a_simulated_ring) {
  const CollectiveKind kinds[] = {CollectiveKind::all_gather, CollectiveKind::reduce_scatter,
                                  CollectiveKind::all_reduce, CollectiveKind::broadcast,
                                  CollectiveKind::all_to_all};
  for (CollectiveKind kind : kinds)
    for (int p = 1; p <= 5; ++p)
      for (std::int64_t e = 0; e <= 13; ++e) {
        // all-gather and reduce-scatter buffers hold p equal chunks.
        const bool whole_chunks = kind == CollectiveKind::all_gather ||
                                  kind == CollectiveKind::reduce_scatter ||
                                  kind == CollectiveKind::all_to_all;
        const std::int64_t numel = whole_chunks ? e * p : e;
        for (std::size_t itemsize : {2, 4})
          for (int root = 0; root < p; ++root) {
            if (kind != CollectiveKind::broadcast && root > 0) continue;
            const Simulated sim = simulate(kind, numel, itemsize, p, root);
            for (int r = 0; r < p; ++r) {
              const LinkBytes got = ring_link_bytes(kind, numel, itemsize, p, r, root);
              const LinkBytes& want = sim.ranks[static_cast<std::size_t>(r)];
              BOOST_CHECK_MESSAGE(got.sent == want.sent && got.received == want.received,
                                  collective_kind_name(kind)
                                      << " of " << numel << " x " << itemsize << " B, rank " << r
                                      << " of " << p << ", root " << root << ": " << got.sent << "/"
                                      << got.received << " B, the ring moves " << want.sent << "/"
                                      << want.received);
            }
          }
      }
}

BOOST_AUTO_TEST_CASE(counters_by_hand_on_one_to_four_ranks) {
  for (int n = 1; n <= 4; ++n)
    on_ranks(n, [](const CommPtr& world) { test::check_traffic(*world); });
}

BOOST_AUTO_TEST_CASE(a_group_counting_its_own_traffic_leaves_the_rank_s) {
  on_ranks(2, [](const CommPtr& world) {
    auto side = world->split(0, world->rank());
    side->count_own_traffic();
    Tensor t = Tensor::zeros({5}, DType::f32);
    side->all_reduce(t, ReduceOp::sum);
    if (world->traffic()->read().total().calls != 0)
      throw std::runtime_error("the side group's all-reduce counted on the world's counters");
    if (side->traffic()->read()[CollectiveKind::all_reduce].calls != 1)
      throw std::runtime_error("the side group did not count its all-reduce");
  });
}

BOOST_AUTO_TEST_CASE(link_time_and_names) {
  const LinkModel none;
  BOOST_TEST(!none.enabled());
  BOOST_TEST(none.time(1 << 20).count() == 0);
  BOOST_TEST(none.str() == "none");
  // 100 Gb/s: 12.5 bytes per ns; 1 MB = 80000 ns, plus 5 us.
  const LinkModel link{.gbps = 100, .latency_us = 5};
  BOOST_TEST(link.time(1000000).count() == 85000);
  BOOST_TEST(link.time(0).count() == 5000);
  BOOST_TEST(link.str() == "100 Gb/s + 5 us");
  BOOST_TEST((LinkModel{.gbps = 400}).time(3).count() == 1);  // 0.06 ns, rounded up
  BOOST_TEST((LinkModel{.latency_us = 2.5}).str() == "2.5 us");
}

BOOST_AUTO_TEST_CASE(bad_link_settings_are_refused_by_name) {
  expect_invalid([] { check_link_model({.gbps = -1}); }, "the link bandwidth -1");
  expect_invalid([] { check_link_model({.gbps = 1e-4}); }, "bandwidth in Gb/s");
  expect_invalid([] { check_link_model({.gbps = 1e7}); }, "bandwidth in Gb/s");
  expect_invalid([] { check_link_model({.latency_us = -3}); }, "the link latency -3");
  expect_invalid([] { check_link_model({.latency_us = 2e6}); }, "latency in microseconds");
  expect_invalid([] { check_link_model({.gbps = std::nan("")}); }, "bandwidth");
  BOOST_CHECK_NO_THROW(check_link_model({.gbps = 0, .latency_us = 0}));
  {
    ScopedEnv e("ZRT_LINK_GBPS", "fast");
    expect_invalid([] { (void)link_model_from_env(); },
                   "ZRT_LINK_GBPS='fast' is not a bandwidth in Gb/s from 0.001 to 1e+06");
    expect_invalid([] { (void)make_local_world(2); }, "ZRT_LINK_GBPS='fast'");
  }
  {
    ScopedEnv e("ZRT_LINK_US", "-1");
    expect_invalid([] { (void)link_model_from_env(); },
                   "ZRT_LINK_US='-1' is not a latency in microseconds from 0 to 1e+06");
  }
  {
    ScopedEnv e("ZRT_LINK_GBPS", "1e-9");
    expect_invalid([] { (void)link_model_from_env(); }, "ZRT_LINK_GBPS='1e-9' is not");
  }
  {
    ScopedEnv g("ZRT_LINK_GBPS", "100"), u("ZRT_LINK_US", "7.5");
    const LinkModel m = link_model_from_env();
    BOOST_TEST(m.gbps == 100);
    BOOST_TEST(m.latency_us == 7.5);
    // The local world starts from the environment; a split inherits it.
    auto world = make_local_world(1);
    BOOST_TEST(world[0]->link_model().str() == "100 Gb/s + 7.5 us");
    BOOST_TEST(world[0]->split(0, 0)->link_model().str() == "100 Gb/s + 7.5 us");
  }
  BOOST_TEST(make_local_world(1)[0]->link_model().str() == "none");
  expect_invalid([] { make_local_world(1)[0]->set_link_model({.gbps = -2}); }, "bandwidth");
}

// Each collective under a 2 Gb/s, 30 ms link lasts at least its modelled
// time (a lower bound cannot flake; the upper bound is only a sanity check
// with seconds of room), on the calling thread and on an owned CPU stream,
// and gives the bits it gives without the model.
BOOST_AUTO_TEST_CASE(collectives_last_the_modelled_time_with_the_same_results) {
  const std::uint64_t seed = test::test_seed("comm_traffic");
  const LinkModel link{.gbps = 2, .latency_us = 30000};
  // A group of one crosses no link: its collectives are not held (a 1 s
  // latency, so that the no-op all-reduce cannot come near it).
  on_ranks(1, [&](const CommPtr& world) {
    const LinkModel slow{.latency_us = 1e6};
    world->set_link_model(slow);
    Tensor t = Tensor::zeros({7}, DType::f32);
    const auto t0 = std::chrono::steady_clock::now();
    world->all_reduce(t, ReduceOp::sum);
    if (std::chrono::steady_clock::now() - t0 >= slow.time(0))
      throw std::runtime_error("a group of one rank was held for the link's latency");
  });
  for (int n : {2, 3}) {
    std::vector<std::vector<double>> plain(n), held(n);
    for (bool modelled : {false, true})
      on_ranks(n, [&](const CommPtr& world) {
        if (modelled) world->set_link_model(link);
        auto zero = world->split(0, world->rank());  // inherits the model
        const int r = world->rank();
        // 50001 odd-valued floats per rank: 200 kB, about 0.8 ms a pass at 2 Gb/s.
        const std::int64_t e = 50001;
        std::vector<double> v(static_cast<std::size_t>(e * n));
        for (std::size_t i = 0; i < v.size(); ++i)
          v[i] = test::input_value(seed, r, static_cast<std::int64_t>(i)) / 3.0;
        Tensor in = Tensor::from_doubles(v, DType::f32);
        Tensor out = Tensor::zeros({e}, DType::f32);
        Tensor all = Tensor::zeros({e * n}, DType::f32);
        OwnedStream comm_stream(Device::cpu());
        auto timed = [&](CollectiveKind kind, std::int64_t numel, auto&& call) {
          const LinkBytes b = ring_link_bytes(kind, numel, 4, n, r);
          const auto want = link.time(std::max(b.sent, b.received));
          const auto t0 = std::chrono::steady_clock::now();
          call();
          const auto took = std::chrono::steady_clock::now() - t0;
          if (!modelled) return;
          if (took < want || took > want + 5s)
            throw std::runtime_error(detail::concat(
                collective_kind_name(kind), " on rank ", r, " of ", n, " took ",
                std::chrono::duration<double, std::milli>(took).count(), " ms; the link model ",
                std::chrono::duration<double, std::milli>(want).count(), " ms"));
        };
        timed(CollectiveKind::reduce_scatter, e * n,
              [&] { zero->reduce_scatter_tensor(out, in, ReduceOp::sum); });
        timed(CollectiveKind::all_gather, e * n, [&] {
          zero->all_gather_into_tensor(all, out, comm_stream);
          comm_stream.get().synchronize();
        });
        Tensor sum = in.clone();
        timed(CollectiveKind::all_reduce, e * n, [&] { world->all_reduce(sum, ReduceOp::sum); });
        timed(CollectiveKind::broadcast, e * n, [&] { world->broadcast(sum, n - 1); });
        std::vector<double> bits = all.to_doubles();
        const std::vector<double> s = sum.to_doubles();
        bits.insert(bits.end(), s.begin(), s.end());
        (modelled ? held : plain)[static_cast<std::size_t>(r)] = std::move(bits);
      });
    for (int r = 0; r < n; ++r)
      BOOST_CHECK_MESSAGE(
          plain[r].size() == held[r].size() &&
              std::memcmp(plain[r].data(), held[r].data(), plain[r].size() * sizeof(double)) == 0,
          "rank " << r << " of " << n << ": results differ under the link model");
  }
}

BOOST_AUTO_TEST_SUITE_END()
