// The comm watchdog (Note [Comm watchdog]) on CPU ranks: a rank that never
// arrives, a backend whose collective blocks with no deadline of its own, an
// asynchronous error, a deadline that restarts on progress, bad arguments.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "zrt/runtime/comm/comm_watchdog.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/stream.h"

using namespace zrt;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// A backend whose all_reduce blocks until abort(), with no timeout of its
// own: the fault the watchdog is for. barrier returns at once; the rest is
// not used here.
class BlockingComm final : public Communicator {
 public:
  BlockingComm(int rank, int size) : Communicator(rank, size, "blocking") {}
  const char* backend_name() const override { return "blocking"; }

  std::string async_error() const override {
    std::lock_guard lock(mu_);
    return async_;
  }
  void report_async_error(std::string e) {
    std::lock_guard lock(mu_);
    async_ = std::move(e);
  }
  bool blocked_call_returned() const {
    std::lock_guard lock(mu_);
    return returned_;
  }

 protected:
  void do_all_reduce(const Tensor&, ReduceOp, Stream) override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return woken_; });
    returned_ = true;
    ZRT_THROW(CommError, where("all_reduce"), ": ", why_);
  }
  void do_abort(const std::string& why) noexcept override {
    {
      std::lock_guard lock(mu_);
      woken_ = true;
      why_ = why;
    }
    cv_.notify_all();
  }
  void do_barrier() override {}
  void do_all_gather(const Tensor&, const Tensor&, Stream) override { unused(); }
  void do_all_to_all(const Tensor&, const Tensor&, Stream) override { unused(); }
  void do_reduce_scatter(const Tensor&, const Tensor&, ReduceOp, Stream) override { unused(); }
  void do_broadcast(const Tensor&, int, Stream) override { unused(); }
  std::vector<std::vector<std::byte>> do_all_gather_bytes(std::span<const std::byte>) override {
    unused();
  }
  std::unique_ptr<Communicator> do_split(int, int, std::string) override { unused(); }

 private:
  [[noreturn]] static void unused() {
    ZRT_THROW(InvalidState, "BlockingComm: not used by this test");
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false, returned_ = false;
  std::string why_, async_;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What one rank's watched wait ended with.
struct Outcome {
  bool comm_error = false;
  std::string message;  // empty: the wait returned
  double seconds = 0;   // how long the wait took
};

template <class F>
Outcome timed(F&& wait) {
  Outcome o;
  const auto start = Clock::now();
  try {
    wait();
  } catch (const CommError& e) {
    o.comm_error = true;
    o.message = e.what();
  } catch (const std::exception& e) {
    o.message = std::string("not a CommError: ") + e.what();
  }
  o.seconds = seconds_since(start);
  return o;
}

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// A one-rank BlockingComm with `timeout` whose first collective, an
// all-reduce queued on a CPU stream, blocks.
struct StuckAllReduce {
  std::shared_ptr<BlockingComm> comm = std::make_shared<BlockingComm>(0, 1);
  OwnedStream stream{Device::cpu()};
  Tensor t = Tensor::zeros({4}, DType::f32);
  explicit StuckAllReduce(std::chrono::milliseconds timeout) {
    comm->set_timeout(timeout);
    comm->all_reduce(t, ReduceOp::sum, stream);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_watchdog)

// Ranks 0 and 1 of 3 all-reduce on a CPU communication stream; rank 2 never
// arrives. Each waiting rank's host wait ends about one timeout later with a
// CommError naming the op, the group and the sequence number; the stream's
// thread returns (the collective failed), and the group refuses what comes.
BOOST_AUTO_TEST_CASE(a_rank_that_never_arrives) {
  constexpr auto kTimeout = 400ms;
  const std::vector<CommPtr> world = make_local_world(3, kTimeout);
  std::vector<Outcome> waits(2), drains(2);
  std::vector<std::string> later(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      OwnedStream stream(Device::cpu());
      Tensor t = Tensor::zeros({8}, DType::f32);
      world[r]->all_reduce(t, ReduceOp::sum, stream);
      waits[r] = timed(
          [&] { CommWatchdog({world[r]}).synchronize(stream, "waiting for the all-reduce"); });
      drains[r] = timed([&] { stream.get().synchronize(); });  // the stuck task has returned
      try {
        world[r]->all_reduce(t, ReduceOp::sum);
      } catch (const CommError& e) {
        later[r] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    BOOST_TEST_MESSAGE("rank " << r << " after " << waits[r].seconds << " s: " << waits[r].message);
    BOOST_CHECK_MESSAGE(waits[r].comm_error, "rank " << r << ": " << waits[r].message);
    BOOST_CHECK_MESSAGE(contains(waits[r].message, "all_reduce #1 on group world (rank " +
                                                       std::to_string(r) + " of 3)"),
                        waits[r].message);
    // Not early: the backend's own timeout may fire first, from its own
    // start a little before the wait's, on a loaded machine a little more.
    BOOST_CHECK_GE(waits[r].seconds, 0.75 * std::chrono::duration<double>(kTimeout).count());
    BOOST_CHECK_LE(waits[r].seconds, std::chrono::duration<double>(kTimeout).count() + 2.0);
    BOOST_CHECK(drains[r].comm_error);
    BOOST_CHECK_LE(drains[r].seconds, 1.0);
    BOOST_CHECK_MESSAGE(contains(later[r], "on group world"),
                        "a later collective: '" << later[r] << "'");
  }
}

// Without the watchdog the wait would never end: the backend's all_reduce
// has no deadline. Through it, every rank's wait ends one timeout after it
// started with CommError naming the collective from the flight recorder,
// the group is aborted, and the blocked call returns.
BOOST_AUTO_TEST_CASE(catches_a_collective_with_no_deadline) {
  constexpr auto kTimeout = 300ms;
  std::vector<Outcome> waits(2);
  std::vector<char> still_blocked(2), returned(2),
      aborted(2);  // one byte per rank: vector<bool> packs bits
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      auto comm = std::make_shared<BlockingComm>(r, 2);
      comm->set_timeout(kTimeout);
      OwnedStream stream(Device::cpu());
      Tensor t = Tensor::zeros({4}, DType::f32);
      comm->barrier();  // #1: done, so the blocked one is #2
      comm->all_reduce(t, ReduceOp::sum, stream);
      Event issued(Device::cpu());
      issued.record(stream);
      std::this_thread::sleep_for(2 * kTimeout);
      still_blocked[r] = !issued.query();  // what a plain synchronize would wait for, forever
      waits[r] =
          timed([&] { CommWatchdog({comm}).synchronize(stream, "waiting for the all-reduce"); });
      try {
        stream.get().synchronize();
      } catch (const CommError&) {
      }
      returned[r] = comm->blocked_call_returned();
      aborted[r] = comm->aborted();
    });
  for (auto& t : ranks) t.join();
  const double timeout_s = std::chrono::duration<double>(kTimeout).count();
  for (int r = 0; r < 2; ++r) {
    BOOST_TEST_MESSAGE("rank " << r << " after " << waits[r].seconds << " s: " << waits[r].message);
    BOOST_CHECK(still_blocked[r]);
    BOOST_CHECK_MESSAGE(waits[r].comm_error, waits[r].message);
    BOOST_CHECK_MESSAGE(
        contains(waits[r].message, "all_reduce #2 on group blocking (rank " + std::to_string(r) +
                                       " of 2): waiting for the all-reduce timed out after 300 ms"),
        waits[r].message);
    BOOST_CHECK_MESSAGE(contains(waits[r].message, "aborted group(s) blocking"), waits[r].message);
    BOOST_CHECK_GE(waits[r].seconds, 0.95 * timeout_s);
    BOOST_CHECK_LE(waits[r].seconds, timeout_s + 1.0);
    BOOST_CHECK(returned[r]);
    BOOST_CHECK(aborted[r]);
  }
}

// A collective that runs on the calling thread first waits for those the
// group queued on CPU streams: through the watchdog, so a stuck one ends it.
BOOST_AUTO_TEST_CASE(calling_thread_collective_behind_a_stuck_one) {
  StuckAllReduce stuck(200ms);
  auto& comm = stuck.comm;
  OwnedStream& stream = stuck.stream;
  const Outcome o = timed([&] { comm->barrier(); });
  BOOST_TEST_MESSAGE(o.message);
  BOOST_CHECK_MESSAGE(
      o.comm_error && contains(o.message,
                               "all_reduce #1 on group blocking (rank 0 of 1): barrier "
                               "waiting for the collectives queued before it"),
      o.message);
  BOOST_CHECK_LE(o.seconds, 1.2);
  BOOST_CHECK_THROW(stream.get().synchronize(), CommError);
  BOOST_CHECK(comm->blocked_call_returned());
}

// An asynchronous error ends the wait at once, long before the timeout.
BOOST_AUTO_TEST_CASE(async_error_ends_the_wait_early) {
  StuckAllReduce stuck(30s);
  auto& comm = stuck.comm;
  OwnedStream& stream = stuck.stream;
  std::thread peer([&] {
    std::this_thread::sleep_for(100ms);
    comm->report_async_error("peer 3 is gone");
  });
  const Outcome o = timed([&] { CommWatchdog({comm}).synchronize(stream, "waiting"); });
  peer.join();
  BOOST_TEST_MESSAGE(o.message);
  BOOST_CHECK_MESSAGE(
      o.comm_error && contains(o.message, "all_reduce #1 on group blocking (rank 0 of 1)") &&
          contains(o.message, "asynchronous error on group blocking: peer 3 is gone"),
      o.message);
  BOOST_CHECK_GE(o.seconds, 0.09);
  BOOST_CHECK_LE(o.seconds, 5.0);
  BOOST_CHECK(comm->aborted());
  BOOST_CHECK_THROW(stream.get().synchronize(), CommError);
}

// The deadline is a timeout without progress: a queue of collectives that
// each finish in time may take longer than one timeout in all.
BOOST_AUTO_TEST_CASE(progress_restarts_the_deadline) {
  constexpr auto kTimeout = 600ms;
  constexpr int kCollectives = 4;
  constexpr auto kEach = 300ms;  // kCollectives * kEach = 2 timeouts
  const std::vector<CommPtr> world = make_local_world(2, kTimeout);
  std::vector<Outcome> waits(2);
  std::vector<double> sums(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      OwnedStream stream(Device::cpu());
      Tensor t = Tensor::from_doubles({1.0}, DType::f64);
      for (int i = 0; i < kCollectives; ++i) {
        run_on_cpu_stream(stream, "slow work", [&] { std::this_thread::sleep_for(kEach); });
        world[r]->all_reduce(t, ReduceOp::sum, stream);
      }
      waits[r] =
          timed([&] { CommWatchdog({world[r]}).synchronize(stream, "waiting for the queue"); });
      sums[r] = t.to_doubles().at(0);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    BOOST_CHECK_MESSAGE(waits[r].message.empty(), waits[r].message);
    BOOST_CHECK_GT(waits[r].seconds,
                   std::chrono::duration<double>(kTimeout).count());  // longer than one timeout
    BOOST_CHECK_EQUAL(sums[r], 16.0);                                 // 1 doubled four times
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments) {
  BOOST_CHECK_THROW(CommWatchdog(std::vector<CommPtr>{}), InvalidArgument);
  BOOST_CHECK_THROW(CommWatchdog(std::vector<CommPtr>{nullptr, nullptr}), InvalidArgument);
  const std::vector<CommPtr> world = make_local_world(1, 1s);
  const CommWatchdog dog({world[0], nullptr, world[0]});
  BOOST_CHECK_EQUAL(dog.groups().size(), 1u);
  BOOST_CHECK_THROW(dog.wait_until({}, "nothing"), InvalidArgument);
  dog.synchronize(Stream{}, "the default stream");  // nothing in flight: returns
  int polls = 0;
  dog.wait_until([&] { return ++polls == 3; }, "three polls");
  BOOST_CHECK_EQUAL(polls, 3);
}

BOOST_AUTO_TEST_SUITE_END()
