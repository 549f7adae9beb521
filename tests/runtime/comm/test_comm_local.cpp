// The local backend (ranks as threads): every collective x dtype x size for
// 1-4 ranks, split, ZeRO groups, argument validation and timeouts.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <type_traits>

#include "tests/runtime/comm/collective_checks.h"
#include "tests/support/expect_throw.h"
#include "tests/support/rank_check.h"
#include "tests/support/test_seed.h"
#include "zrt/runtime/comm/device_reduce.h"
#include "zrt/runtime/comm/host_reduce.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/comm/zero_groups.h"
#include "zrt/runtime/dtype_dispatch.h"
#include "zrt/runtime/float16.h"
#include "zrt/runtime/stream.h"

using namespace zrt;
using namespace std::chrono_literals;

namespace {

std::uint64_t fresh_seed() {
  return std::random_device{}() * 0x100000001ULL + std::random_device{}();
}

// Runs fn on n local ranks; a failure on any rank fails the test case here,
// on the main thread.
void on_ranks(int n, const std::function<void(const CommPtr&)>& fn,
              std::chrono::milliseconds timeout = 20s) {
  try {
    run_local_ranks(n, fn, timeout);
  } catch (const std::exception& e) {
    BOOST_ERROR("world of " << n << ": " << e.what());
  }
}

using test::expect_throw;

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_local)

BOOST_AUTO_TEST_CASE(every_collective_dtype_and_size) {
  const std::uint64_t seed = fresh_seed();
  BOOST_TEST_MESSAGE("seed " << seed);
  for (int n = 1; n <= 4; ++n)
    for (DType dtype : kAllDTypes)
      for (std::int64_t numel : {0, 1, 7})
        on_ranks(n, [&](const CommPtr& c) { test::check_all_collectives(*c, dtype, numel, seed); });
}

BOOST_AUTO_TEST_CASE(large_f32) {
  const std::uint64_t seed = fresh_seed();
  for (int n : {2, 3})
    on_ranks(n, [&](const CommPtr& c) {
      test::check_all_gather(*c, DType::f32, 1000003, seed);
      test::check_reduce_scatter(*c, DType::f32, 1000003 / n, ReduceOp::avg, seed);
      test::check_all_reduce(*c, DType::f32, 1000003, ReduceOp::sum, seed);
    });
}

BOOST_AUTO_TEST_CASE(all_gather_bytes_of_different_lengths) {
  const std::uint64_t seed = fresh_seed();
  for (int n = 1; n <= 4; ++n)
    on_ranks(n, [&](const CommPtr& c) { test::check_all_gather_bytes(*c, seed); });
}

BOOST_AUTO_TEST_CASE(split_into_subgroups) {
  const std::uint64_t seed = fresh_seed();
  for (int n = 1; n <= 4; ++n) on_ranks(n, [&](const CommPtr& c) { test::check_split(*c, seed); });
}

BOOST_AUTO_TEST_CASE(zero_groups) {
  const std::uint64_t seed = fresh_seed();
  for (int z : {1, 2, 4})
    on_ranks(4, [&](const CommPtr& c) { test::check_zero_groups(c, z, seed); });
  auto world = make_local_world(4);
  expect_throw<InvalidArgument>([&] { make_zero_groups(world[0], 3); }, "does not divide");
  expect_throw<InvalidArgument>([&] { make_zero_groups(world[0], 0); }, "zero3 size 0");
}

BOOST_AUTO_TEST_CASE(bad_arguments_throw_before_any_data_moves) {
  // A single communicator of a world of 2: if validation let a call through,
  // it would wait for rank 1 and time out with CommError instead.
  auto world = make_local_world(2, 5000ms);
  Communicator& c = *world[0];
  Tensor in = Tensor::full({3}, 1.0, DType::f32);
  expect_throw<InvalidArgument>(
      [&] { c.all_gather_into_tensor(Tensor::empty({5}, DType::f32), in); }, "must have 2 x 3");
  expect_throw<InvalidArgument>(
      [&] { c.all_gather_into_tensor(Tensor::empty({6}, DType::bf16), in); }, "different dtypes");
  expect_throw<InvalidArgument>(
      [&] { c.reduce_scatter_tensor(Tensor::empty({2}, DType::f32), in, ReduceOp::sum); },
      "must have 2 x 2");
  expect_throw<InvalidArgument>(
      [&] {
        c.reduce_scatter_tensor(Tensor::empty({3}, DType::f32), Tensor::empty({6}, DType::f32),
                                ReduceOp::max);
      },
      "max is not supported");
  expect_throw<InvalidArgument>([&] { c.broadcast(in, 2); }, "root 2");
  expect_throw<InvalidArgument>([&] { c.broadcast(in, -1); }, "root -1");
  Tensor freed = Tensor::full({4}, 1.0, DType::f32);
  free_storage(freed);
  expect_throw<InvalidArgument>([&] { c.all_reduce(freed, ReduceOp::sum); }, "freed storage");
  expect_throw<InvalidArgument>(
      [&] { c.all_gather_into_tensor(Tensor::empty({8}, DType::f32), freed); }, "freed storage");
  // Overlap that is not this rank's chunk.
  Tensor whole = Tensor::full({6}, 1.0, DType::f32);
  expect_throw<InvalidArgument>([&] { c.all_gather_into_tensor(whole, whole.slice(1, 3)); },
                                "not this rank's chunk");
  expect_throw<InvalidArgument>([&] { c.split(-1, 0); }, "color -1");
  BOOST_CHECK_EQUAL(c.sequence_number(), 0u);  // nothing was counted
}

BOOST_AUTO_TEST_CASE(sequence_numbers_and_where) {
  on_ranks(2, [](const CommPtr& c) {
    Tensor t = Tensor::full({2}, 1.0, DType::f32);
    c->all_reduce(t, ReduceOp::sum);
    c->barrier();
    if (c->sequence_number() != 2) throw std::runtime_error("sequence number is not 2");
  });
}

BOOST_AUTO_TEST_CASE(missing_rank_times_out_naming_it) {
  auto world = make_local_world(3, 200ms);
  std::vector<std::string> messages(3);
  std::vector<double> waited(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)  // rank 2 never arrives
    threads.emplace_back([&, r] {
      auto t0 = std::chrono::steady_clock::now();
      Tensor t = Tensor::full({5}, 1.0, DType::f32);
      try {
        world[r]->all_reduce(t, ReduceOp::sum);
      } catch (const CommError& e) {
        messages[r] = e.what();
      }
      waited[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    BOOST_TEST_MESSAGE(messages[r]);
    BOOST_CHECK_MESSAGE(messages[r].find("[2]") != std::string::npos, messages[r]);
    BOOST_CHECK_MESSAGE(messages[r].find("all_reduce #1 on group world") != std::string::npos,
                        messages[r]);
    BOOST_CHECK_LT(waited[r], 2.0);
  }
  // The group is broken now: a late rank fails at once instead of hanging.
  Tensor t = Tensor::full({5}, 1.0, DType::f32);
  expect_throw<CommError>([&] { world[2]->all_reduce(t, ReduceOp::sum); }, "failed earlier");
}

BOOST_AUTO_TEST_CASE(missing_rank_times_out_on_a_cpu_stream_too) {
  // Note [CPU streams]: a collective queued on a rank's communication stream
  // runs on that stream's thread; the group's timeout still applies there,
  // and the CommError surfaces, with its type and the collective's name, at
  // the caller's next synchronize (and the stream's later work is skipped).
  auto world = make_local_world(2, 200ms);
  OwnedStream comm(Device::cpu());
  const auto t0 = std::chrono::steady_clock::now();
  Tensor t = Tensor::full({5}, 1.0, DType::f32);
  Tensor after = Tensor::full({5}, 1.0, DType::f32);
  world[0]->all_reduce(t, ReduceOp::sum, comm.get());  // returns at once; rank 1 never arrives
  world[0]->all_reduce(after, ReduceOp::sum, comm.get());
  std::string message;
  try {
    comm.get().synchronize();
  } catch (const CommError& e) {
    message = e.what();
  }
  BOOST_TEST_MESSAGE(message);
  BOOST_CHECK_MESSAGE(message.find("all_reduce #1 on group world") != std::string::npos, message);
  BOOST_CHECK_MESSAGE(message.find("[1]") != std::string::npos, message);
  // The limit is the world's own, not the environment's default.
  BOOST_CHECK_MESSAGE(message.find("the limit is the one the group was given: run_local_ranks") !=
                          std::string::npos,
                      message);
  BOOST_CHECK_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  BOOST_TEST(after.item(0) == 1.0);  // skipped: the stream failed before it
}

// Note [Host reads of queued work]: a collective queued on a CPU stream
// that has not run yet writes its output later; a host read of it before
// then is refused, naming the tensor, as a queued kernel's output is.
BOOST_AUTO_TEST_CASE(a_host_read_of_a_queued_collective_output_is_refused) {
  on_ranks(2, [](const CommPtr& c) {
    OwnedStream s(Device::cpu());
    std::promise<void> go;
    std::shared_future<void> released = go.get_future().share();
    run_on_cpu_stream(s, "held", [released] { released.wait(); });  // the stream is busy
    Tensor sum = Tensor::full({7}, 1.0 + c->rank(), DType::f32);
    sum.set_name("sum");
    Tensor gathered = Tensor::zeros({14}, DType::f32);
    gathered.set_name("gathered");
    c->all_reduce(sum, ReduceOp::sum, s.get());
    c->all_gather_into_tensor(gathered, Tensor::full({7}, 5.0, DType::f32), s.get());
    for (Tensor* t : {&sum, &gathered}) {
      bool refused = false;
      try {
        t->to_doubles();
      } catch (const InvalidState& e) {
        refused = std::string(e.what()).find(t->name()) != std::string::npos;
      }
      ZRT_EXPECT(refused, "rank ", c->rank(), ": a read of ", t->name(),
                 " before its queued collective ran was not refused");
    }
    go.set_value();
    s.get().synchronize();
    ZRT_EXPECT(sum.item(6) == 3.0 && gathered.item(13) == 5.0, "rank ", c->rank(),
               ": wrong values after synchronize()");
  });
}

// A group dropped while its collectives are still queued on a CPU stream:
// they call the group's backend, so its destruction waits for them (the
// stream's thread would otherwise run them on a freed communicator: a crash
// or a malloc assertion, seen under ASan as a use after free). Ranks drop
// their groups at different times.
BOOST_AUTO_TEST_CASE(a_group_dropped_with_collectives_queued_waits_for_them) {
  on_ranks(4, [](const CommPtr& c) {
    constexpr std::int64_t kNumel = 1 << 10;
    OwnedStream s(Device::cpu());
    Tensor t = Tensor::full({kNumel}, 1.0, DType::f32);
    Tensor half = Tensor::full({kNumel / 2}, 0.0, DType::f32);
    for (int i = 0; i < 20; ++i) {
      std::unique_ptr<Communicator> g = c->split(c->rank() % 2, c->rank());
      g->all_reduce(t, ReduceOp::max, s.get());
      g->reduce_scatter_tensor(half, t, ReduceOp::avg, s.get());
      if (c->rank() >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(i % 3));
      g.reset();  // with both collectives still queued on s
      s.get().synchronize();
    }
    if (half.item(0) != 1.0 || half.item(kNumel / 2 - 1) != 1.0)
      throw std::runtime_error("the max and average of ones are not one");
  });
}

BOOST_AUTO_TEST_CASE(rank_that_throws_does_not_hang_the_others) {
  auto t0 = std::chrono::steady_clock::now();
  BOOST_CHECK_THROW(run_local_ranks(
                        3,
                        [](const CommPtr& c) {
                          if (c->rank() == 1) throw std::runtime_error("rank 1 fails");
                          c->barrier();
                        },
                        200ms),
                    std::exception);
  BOOST_CHECK_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

BOOST_AUTO_TEST_CASE(a_failed_rank_stops_the_others_at_once) {
  // Rank 1 fails; rank 0 waits for it in a group split from the world,
  // ranks 2 and 3 in the world. Nobody waits for the 60 s timeout, and the
  // caller gets rank 1's error, not a CommError it caused.
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<int> stopped = 0;
  try {
    run_local_ranks(
        4,
        [&](const CommPtr& c) {
          auto pair = c->split(c->rank() / 2, c->rank());
          if (c->rank() == 1) throw std::runtime_error("rank 1 fails");
          try {
            c->rank() == 0 ? pair->barrier() : c->barrier();
          } catch (const CommError& e) {
            if (std::string(e.what()).find("rank 1 failed: rank 1 fails") != std::string::npos)
              ++stopped;
            throw;
          }
        },
        60s);
    BOOST_ERROR("no error");
  } catch (const CommError& e) {
    BOOST_ERROR("the error of a rank that was stopped: " << e.what());
  } catch (const std::runtime_error& e) {
    BOOST_TEST(std::string(e.what()) == "rank 1 fails");
  }
  BOOST_TEST(stopped.load() == 3);
  BOOST_CHECK_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 10.0);
}

// Note [Collective contract]: each kind of mismatch, on 2-4 ranks, is the
// same CommError on every rank, naming both sides; the group goes on.
BOOST_AUTO_TEST_CASE(mismatched_collectives_are_named_on_every_rank) {
  const std::uint64_t seed = test::test_seed("comm_local/mismatched_collectives");
  for (int n = 2; n <= 4; ++n)
    for (test::Mismatch what : test::kAllMismatches)
      on_ranks(
          n,
          [&](const CommPtr& c) {
            test::check_mismatch_is_named(*c, what, seed + static_cast<std::uint64_t>(what));
          },
          5s);
}

BOOST_AUTO_TEST_CASE(default_timeout_reads_the_environment) {
  ::setenv("ZRT_COMM_TIMEOUT_S", "0.25", 1);
  BOOST_CHECK_EQUAL(default_comm_timeout().count(), 250);
  {  // a world on that default: its timeout message names the variable
    auto world = make_local_world(2);
    Tensor t = Tensor::full({3}, 1.0, DType::f32);
    std::string message;
    try {
      world[0]->all_reduce(t, ReduceOp::sum);  // rank 1 never arrives
    } catch (const CommError& e) {
      message = e.what();
    }
    BOOST_CHECK_MESSAGE(message.find("ZRT_COMM_TIMEOUT_S sets the limit") != std::string::npos,
                        message);
  }
  for (const char* bad : {"soon", "0x10", " 5", "5 ", "1e-3x"}) {  // decimal only, no blanks
    ::setenv("ZRT_COMM_TIMEOUT_S", bad, 1);
    BOOST_CHECK_THROW(default_comm_timeout(), InvalidArgument);
  }
  ::unsetenv("ZRT_COMM_TIMEOUT_S");
  BOOST_CHECK_EQUAL(default_comm_timeout().count(), 300000);
}

// A timeout given in code is refused as ZRT_COMM_TIMEOUT_S's is when it is
// not positive: every collective would fail at once, blaming the ranks.
BOOST_AUTO_TEST_CASE(a_timeout_that_is_not_positive_is_refused) {
  using std::chrono::milliseconds;
  for (const auto bad : {milliseconds(0), milliseconds(-5)}) {
    test::expect_throw<InvalidArgument>(
        [&] { make_local_world(2, bad); },
        "the collective timeout must be positive, got " + std::to_string(bad.count()) + " ms");
    test::expect_throw<InvalidArgument>(
        [&] {
          run_local_ranks(
              2, [](const CommPtr&) {}, bad);
        },
        "the collective timeout must be positive");
    test::expect_throw<InvalidArgument>([&] { make_local_world(1)[0]->set_timeout(bad); },
                                        "the timeout of group world must be positive");
  }
}

// Note [Local ranks that return early]: the ranks waiting for a rank that
// returned hear of it at once, not after the timeout, and so does a later
// collective of a group that holds it; a group of the others goes on.
BOOST_AUTO_TEST_CASE(a_rank_that_returns_early_is_named_at_once) {
  const auto seed = test::test_seed("comm_local/a_rank_that_returns_early_is_named_at_once");
  std::vector<std::string> waiting(3), later(3);
  std::vector<double> pair_sum(3, 0);
  const auto started = std::chrono::steady_clock::now();
  run_local_ranks(
      3,
      [&](const CommPtr& world) {
        const int r = world->rank();
        const auto pair = world->split(r < 2 ? 0 : 1, r);   // {0, 1} and {2}
        const auto tail = world->split(r >= 1 ? 0 : 1, r);  // {1, 2} and {0}
        if (r == 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          return;  // one step fewer than the others
        }
        std::mt19937 rng(seed + static_cast<unsigned>(r));
        Tensor t = Tensor::from_doubles({std::normal_distribution<double>()(rng)}, DType::f64);
        try {  // waiting when rank 2 returns
          world->all_reduce(t, ReduceOp::sum);
        } catch (const CommError& e) {
          waiting[r] = e.what();
        }
        if (r == 1) {
          try {  // made after rank 2 returned, in a group nobody failed before
            tail->barrier();
          } catch (const CommError& e) {
            later[r] = e.what();
          }
        }
        pair->all_reduce(t, ReduceOp::sum);  // a group without rank 2
        pair_sum[r] = t.to_doubles()[0];
      },
      std::chrono::seconds(60));
  const auto waited = std::chrono::steady_clock::now() - started;
  BOOST_TEST(waited < std::chrono::seconds(20), "the ranks waited for the timeout");
  for (int r = 0; r < 2; ++r)
    BOOST_TEST(waiting[r].find("world rank 2 returned from its run_local_ranks function while "
                               "this collective waited for it") != std::string::npos,
               waiting[r]);
  BOOST_TEST(later[1].find("barrier #1 on group") != std::string::npos, later[1]);
  BOOST_TEST(
      later[1].find("world rank 2 returned from its run_local_ranks function") != std::string::npos,
      later[1]);
  BOOST_TEST(pair_sum[0] == pair_sum[1]);
}

// Note [Device reductions in batches]: the launches cover the inputs once,
// in rank order, each reading at most max_inputs buffers (dst included).
BOOST_AUTO_TEST_CASE(device_reduce_batches_keep_rank_order) {
  BOOST_CHECK(device_reduce_batches(0).empty());
  BOOST_CHECK(device_reduce_batches(5, 1).empty());
  for (std::size_t max : {std::size_t(2), std::size_t(3), std::size_t(5), kMaxDeviceReduceInputs}) {
    for (std::size_t n = 1; n <= 70; ++n) {
      const auto batches = device_reduce_batches(n, max);
      BOOST_TEST_CONTEXT("inputs " << n << ", at most " << max << " per launch") {
        BOOST_REQUIRE(!batches.empty());
        std::size_t next = 0;
        for (std::size_t i = 0; i < batches.size(); ++i) {
          const DeviceReduceBatch& b = batches[i];
          BOOST_CHECK_EQUAL(b.begin, next);
          BOOST_CHECK_GT(b.end, b.begin);
          BOOST_CHECK_EQUAL(b.accumulates, i > 0);
          BOOST_CHECK_EQUAL(b.last, i + 1 == batches.size());
          BOOST_CHECK_LE(b.end - b.begin + (b.accumulates ? 1 : 0), max);
          next = b.end;
        }
        BOOST_CHECK_EQUAL(next, n);
        // As few launches as the limit allows.
        const std::size_t launches = n <= max ? 1 : 1 + (n - max + max - 2) / (max - 1);
        BOOST_CHECK_EQUAL(batches.size(), launches);
      }
    }
  }
  BOOST_CHECK_EQUAL(device_reduce_batches(kMaxDeviceReduceInputs).size(), 1u);
  BOOST_CHECK_EQUAL(device_reduce_batches(kMaxDeviceReduceInputs + 1).size(), 2u);
}

// What the kernel computes from the batches, on the host: each launch folds
// dst (after the first) and its inputs in order; avg sums and divides once
// by the whole count in the last. It must match host_reduce bit for bit.
BOOST_AUTO_TEST_CASE(batched_reduction_has_the_host_bits) {
  std::mt19937_64 rng(fresh_seed());
  std::uniform_real_distribution<float> value(-8.f, 8.f);
  std::uniform_int_distribution<int> scale(-6, 6), small(0, 9);
  constexpr std::int64_t kNumel = 97;
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min}) {
      for (std::size_t n :
           std::initializer_list<std::size_t>{1, 2, 3, 15, 16, 17, 31, 32, 33, 47}) {
        for (std::size_t max : {std::size_t(2), std::size_t(4), kMaxDeviceReduceInputs}) {
          BOOST_TEST_CONTEXT(dtype_name(dtype) << " " << reduce_op_name(op) << ", " << n
                                               << " inputs, " << max << " per launch") {
            const std::size_t item = dtype_size(dtype);
            std::vector<std::vector<std::byte>> inputs(n, std::vector<std::byte>(kNumel * item));
            dispatch<HostTypes>(dtype, "test", [&](auto tag) {
              using T = typename decltype(tag)::type;
              for (auto& in : inputs)
                for (std::int64_t i = 0; i < kNumel; ++i) {
                  // Magnitudes apart, so another order of the sum rounds otherwise.
                  const float f = std::ldexp(value(rng), scale(rng));
                  T v{};
                  if constexpr (is_float16_v<T>)
                    v = from_f32<T>(f);
                  else if constexpr (std::is_floating_point_v<T>)
                    v = static_cast<T>(f);
                  else
                    v = static_cast<T>(small(rng));
                  std::memcpy(in.data() + i * item, &v, item);
                }
            });
            std::vector<const void*> srcs;
            for (const auto& in : inputs) srcs.push_back(in.data());
            std::vector<std::byte> want(kNumel * item), got(kNumel * item);
            host_reduce(want.data(), srcs, kNumel, dtype, op);
            for (const DeviceReduceBatch& b : device_reduce_batches(n, max)) {
              std::vector<const void*> launch;
              if (b.accumulates) launch.push_back(got.data());
              for (std::size_t r = b.begin; r < b.end; ++r) launch.push_back(srcs[r]);
              const ReduceOp fold = op == ReduceOp::avg ? ReduceOp::sum : op;
              host_reduce(got.data(), launch, kNumel, dtype, fold);
              if (b.last && op == ReduceOp::avg)
                host_divide(got.data(), kNumel, dtype, static_cast<int>(n));
            }
            BOOST_CHECK(std::memcmp(want.data(), got.data(), want.size()) == 0);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
