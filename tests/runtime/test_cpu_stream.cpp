// Note [CPU streams]: an owned CPU stream runs its work in issue order on its
// own thread, events order two streams, a failure surfaces at the next wait
// naming its operation, and copies and kernels capture memory at issue time.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "zrt/runtime/cpu_stream.h"
#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"

using namespace zrt;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(cpu_stream)

BOOST_AUTO_TEST_CASE(runs_in_issue_order_on_its_own_thread) {
  OwnedStream s(Device::cpu());
  std::vector<int> order;
  std::atomic<bool> other_thread{true};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 100; ++i)
    run_on_cpu_stream(s, "append", [&, i] {
      if (std::this_thread::get_id() == caller) other_thread = false;
      order.push_back(i);
    });
  s.get().synchronize();
  BOOST_TEST(other_thread.load());
  BOOST_REQUIRE(order.size() == 100u);
  for (int i = 0; i < 100; ++i) BOOST_TEST(order[static_cast<std::size_t>(i)] == i);
}

BOOST_AUTO_TEST_CASE(a_discarding_stream_drops_work_and_completes_events) {
  // Note [Dry runs]: kernels, copies and waits issued to it never run; event
  // records complete at once, so nothing waits on it.
  OwnedStream s = OwnedStream::discarding();
  BOOST_TEST(s.get().discards());
  BOOST_TEST(!OwnedStream(Device::cpu()).get().discards());
  BOOST_TEST(!Stream().discards());
  bool ran = false;
  run_on_cpu_stream(s, "dropped", [&] { ran = true; });
  Tensor a = Tensor::from_doubles({1, 2, 3}, DType::f32),
         b = Tensor::from_doubles({4, 5, 6}, DType::f32);
  a.copy_(b, s);
  Event done(Device::cpu());
  done.record(s);
  BOOST_TEST(done.query());
  OwnedStream other(Device::cpu());
  done.wait(other);  // complete: nothing to wait for
  other.get().synchronize();
  s.get().synchronize();
  BOOST_TEST(!ran);
  BOOST_TEST(a.to_doubles() == std::vector<double>({1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(default_stream_runs_now) {
  bool ran = false;
  run_on_cpu_stream(Stream(), "now", [&] { ran = true; });
  BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(is_asynchronous_to_the_caller) {
  OwnedStream s(Device::cpu());
  std::atomic<bool> release{false}, ran{false};
  run_on_cpu_stream(s, "block", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  run_on_cpu_stream(s, "after", [&] { ran = true; });
  std::this_thread::sleep_for(20ms);
  BOOST_TEST(!ran.load());  // queued behind the blocked task, while the caller goes on
  release = true;
  s.get().synchronize();
  BOOST_TEST(ran.load());
}

BOOST_AUTO_TEST_CASE(events_order_two_streams) {
  OwnedStream producer(Device::cpu()), consumer(Device::cpu());
  Event ready(Device::cpu());
  std::atomic<bool> release{false};
  int value = 0, seen = -1;
  run_on_cpu_stream(producer, "produce", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
    value = 42;
  });
  ready.record(producer);
  BOOST_TEST(!ready.query());
  ready.wait(consumer);
  run_on_cpu_stream(consumer, "consume", [&] { seen = value; });
  std::this_thread::sleep_for(10ms);
  release = true;
  consumer.get().synchronize();
  BOOST_TEST(seen == 42);
  BOOST_TEST(ready.query());
}

BOOST_AUTO_TEST_CASE(a_wait_sees_the_record_before_it_not_a_later_one) {
  OwnedStream a(Device::cpu()), b(Device::cpu());
  Event e(Device::cpu());
  e.wait(b);  // nothing recorded yet: no wait, as cudaStreamWaitEvent
  b.get().synchronize();
  std::atomic<bool> release{false};
  run_on_cpu_stream(a, "block", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  e.record(a);
  BOOST_TEST(!e.query());
  release = true;
  e.synchronize();
  BOOST_TEST(e.query());
}

BOOST_AUTO_TEST_CASE(a_failure_surfaces_at_the_next_synchronize_naming_the_operation) {
  OwnedStream s(Device::cpu());
  bool later_ran = false;
  run_on_cpu_stream(s, "the_failing_op", [] { ZRT_THROW(InvalidState, "something broke"); });
  run_on_cpu_stream(s, "later", [&] { later_ran = true; });
  try {
    s.get().synchronize();
    BOOST_FAIL("synchronize did not throw");
  } catch (const InvalidState& e) {  // the type is kept
    const std::string what = e.what();
    BOOST_TEST(what.find("the_failing_op") != std::string::npos, what);
    BOOST_TEST(what.find("something broke") != std::string::npos, what);
  }
  BOOST_TEST(!later_ran);                                  // a failed stream skips later work
  BOOST_CHECK_THROW(s.get().synchronize(), InvalidState);  // and stays failed
}

BOOST_AUTO_TEST_CASE(a_failure_reaches_a_stream_that_waits_for_it) {
  OwnedStream failing(Device::cpu()), waiting(Device::cpu());
  Event e(Device::cpu());
  run_on_cpu_stream(failing, "collective", [] { ZRT_THROW(CommError, "timed out"); });
  e.record(failing);
  e.wait(waiting);
  BOOST_CHECK_THROW(waiting.get().synchronize(), CommError);
  try {
    e.synchronize();
    BOOST_FAIL("no throw");
  } catch (const CommError& err) {  // a user error: its location travels beside the message
    BOOST_TEST(std::string(err.what()).find(".cpp:") == std::string::npos, err.what());
    BOOST_TEST(err.where().find("test_cpu_stream.cpp:") != std::string::npos, err.where());
  }
}

BOOST_AUTO_TEST_CASE(copies_follow_the_stream_and_capture_memory_at_issue) {
  const unsigned seed = std::random_device{}();
  BOOST_TEST_MESSAGE("seed " << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist;
  std::vector<double> values(1001);
  for (double& v : values) v = dist(rng);
  OwnedStream s(Device::cpu());
  // A caching allocator gives a freed block back to the same stream only (Note
  // [Explicit cross-stream lifetimes]), so freeing after issue is safe.
  AllocatorPtr alloc = make_caching_allocator(Device::cpu());
  Tensor src = Tensor::empty({1001}, DType::f32, Device::cpu(), alloc, s);
  src.copy_(Tensor::from_doubles(values, DType::f32));
  Tensor dst = Tensor::empty({1001}, DType::bf16);
  std::atomic<bool> release{false};
  run_on_cpu_stream(s, "block", [&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  dst.copy_(src, s);  // queued: runs after the blocking task
  Tensor expect = src.to(DType::bf16);
  free_storage(src);  // legal after issue: the copy captured the memory, as a CUDA copy would
  Tensor reuse = Tensor::empty({1001}, DType::f32, Device::cpu(), alloc, s);
  const Tensor sevens =
      Tensor::full({1001}, 7.0, DType::f32);  // plain host memory: kept until the copy ran
  reuse.copy_(sevens, s);  // the same block, written in stream order after the copy read it
  release = true;
  s.get().synchronize();
  BOOST_TEST(dst.to_doubles() == expect.to_doubles());
  BOOST_TEST(reuse.to_doubles() == sevens.to_doubles());
}

BOOST_AUTO_TEST_CASE(work_issued_from_the_stream_thread_runs_inline) {
  OwnedStream s(Device::cpu());
  std::vector<int> order;
  const Stream stream = s;
  run_on_cpu_stream(stream, "outer", [&] {
    order.push_back(1);
    run_on_cpu_stream(stream, "inner", [&] { order.push_back(2); });
    stream.synchronize();  // from its own thread: no deadlock
    order.push_back(3);
  });
  stream.synchronize();
  BOOST_TEST(order == (std::vector<int>{1, 2, 3}), boost::test_tools::per_element());
}

// Note [Allocations wait for their stream's frees]: the allocator's wait.
// Every wait here has a 10 s stall, so one that should return at once and
// does not fails by its time instead of hanging.
BOOST_AUTO_TEST_CASE(wait_for_a_task_waits_for_one_and_not_twice_for_a_stuck_one) {
  constexpr auto stall = 10s;
  OwnedStream s(Device::cpu());
  CpuStream& queue = *s.get().cpu_queue();
  auto timed_wait = [&](std::chrono::milliseconds wait_stall, bool& result) {
    const auto start = std::chrono::steady_clock::now();
    result = queue.wait_for_a_task(wait_stall);
    return std::chrono::steady_clock::now() - start;
  };
  bool result = true;
  BOOST_TEST((timed_wait(stall, result) < stall / 2));  // nothing queued: at once
  BOOST_TEST(!result);
  // A task released in a second, and a stuck one behind it: the wait
  // returns as the first finishes, not when the queue is empty.
  std::promise<void> release, unstick;
  std::atomic<bool> ran{false};
  run_on_cpu_stream(s, "released later", [&, released = release.get_future().share()] {
    released.wait();
    ran = true;
  });
  run_on_cpu_stream(s, "stuck", [stuck = unstick.get_future().share()] { stuck.wait(); });
  std::thread releaser([&] {
    std::this_thread::sleep_for(1s);
    release.set_value();
  });
  BOOST_TEST((timed_wait(stall, result) < stall / 2));
  BOOST_TEST(result);
  BOOST_TEST(ran.load());
  releaser.join();
  // The stuck task is waited for once, for the stall, then not again.
  BOOST_TEST(!queue.wait_for_a_task(200ms));
  BOOST_TEST((timed_wait(stall, result) < stall / 2));
  BOOST_TEST(!result);
  // A task never waits for its own stream's tasks.
  std::promise<std::pair<bool, std::chrono::steady_clock::duration>> inside;
  run_on_cpu_stream(s, "waits on its own stream", [&] {
    bool from_the_task = true;
    const auto took = timed_wait(stall, from_the_task);
    inside.set_value({from_the_task, took});
  });
  run_on_cpu_stream(s, "queued behind it", [] {});
  unstick.set_value();
  const auto [from_the_task, took] = inside.get_future().get();
  BOOST_TEST(!from_the_task);
  BOOST_TEST((took < stall / 2));
  s.get().synchronize();
}

BOOST_AUTO_TEST_CASE(cuda_streams_take_no_host_work) {
  BOOST_CHECK_THROW(run_on_cpu_stream(Stream::cuda(0, nullptr), "x", [] {}), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
