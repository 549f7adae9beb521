// The caching allocator under zrt's own users: tensors, storages that are
// freed and re-allocated (Note [Freed storage]), several threads, and the
// user-facing factories.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "tests/runtime/memory/fake_memory_sources.h"
#include "zrt/runtime/device.h"
#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/stream.h"
#include "zrt/runtime/tensor.h"

using namespace zrt;
using zrt::test::fake_stream;
using zrt::test::FakeAllocator;

BOOST_AUTO_TEST_SUITE(caching_allocator_users)

BOOST_AUTO_TEST_CASE(tensors_cycle_their_storage_through_the_cache) {
  std::mt19937_64 rng(std::random_device{}());
  AllocatorPtr alloc = make_caching_allocator(Device::cpu());
  BOOST_TEST((alloc->device() == Device::cpu()));
  {
    Tensor t = Tensor::empty({257, 3}, DType::f32, Device::cpu(), alloc);
    Tensor row = t.narrow(5, 1);
    MemoryStats s = alloc->stats();
    BOOST_TEST(s.requested == 257u * 3 * 4);
    BOOST_TEST(s.allocated == 3584u);  // 3084 rounded to 512
    BOOST_TEST(s.num_raw_allocs == 1u);
    void* first = t.data_ptr();

    std::uniform_real_distribution<double> dist(-2, 2);
    for (int cycle = 0; cycle < 4; ++cycle) {
      t.fill_(-999.0);  // poison before writing
      std::vector<double> values(3);
      for (auto& v : values) v = dist(rng);
      row.copy_(Tensor::from_doubles(values, DType::f64));
      BOOST_TEST(row.to_doubles() == Tensor::from_doubles(values, DType::f32).to_doubles());
      BOOST_TEST(t.item(5 * 3 - 1) == -999.0);

      free_storage(t);
      BOOST_TEST(row.is_freed());
      BOOST_TEST(alloc->stats().allocated == 0u);
      BOOST_TEST(alloc->stats().reserved == 2u * 1024 * 1024);
      alloc_storage(t);
      BOOST_TEST(t.data_ptr() == first);  // the cached block comes back
    }
    MemoryStats after = alloc->stats();
    BOOST_TEST(after.num_raw_allocs == 1u);
    BOOST_TEST(after.num_allocs == 5u);
    BOOST_TEST(after.num_frees == 4u);
  }
  BOOST_TEST(alloc->stats().allocated == 0u);
  BOOST_TEST(alloc->stats().num_frees == 5u);

  Tensor empty = Tensor::empty({0, 7}, DType::bf16, Device::cpu(), alloc);
  BOOST_TEST(alloc->stats().num_allocs == 5u);  // nothing to allocate
  alloc->empty_cache();
  BOOST_TEST(alloc->stats().reserved == 0u);
}

BOOST_AUTO_TEST_CASE(storage_record_use_holds_the_block) {
  FakeAllocator a;
  Stream compute = fake_stream(1), gather = fake_stream(2);
  Storage storage(4096 + 7, a.alloc, compute);
  void* first = storage.data();
  storage.record_use(gather);
  storage.free();
  BOOST_TEST(a.events->recorded.size() == 1u);
  storage.allocate(4096 + 7);  // on compute again: the old block is held
  BOOST_TEST(storage.data() != first);
  storage.free();
  a.events->complete_all();
  storage.allocate(4096 + 7);
  BOOST_TEST(storage.data() == first);
}

BOOST_AUTO_TEST_CASE(threads_share_one_allocator) {
  AllocatorPtr alloc = make_caching_allocator(Device::cpu());
  const int threads = 4, rounds = 400;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(std::random_device{}() + t);
      std::vector<void*> mine;
      for (int i = 0; i < rounds; ++i) {
        std::size_t n = std::uniform_int_distribution<std::size_t>(1, 200000)(rng);
        void* p = alloc->allocate(n, fake_stream(10 + t));
        static_cast<unsigned char*>(p)[n - 1] = 1;
        mine.push_back(p);
        if (mine.size() > 8) {
          alloc->deallocate(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (void* p : mine) alloc->deallocate(p);
    });
  }
  for (auto& th : pool) th.join();
  MemoryStats s = alloc->stats();
  BOOST_TEST(s.num_allocs == std::uint64_t(threads * rounds));
  BOOST_TEST(s.num_frees == s.num_allocs);
  BOOST_TEST(s.allocated == 0u);
  BOOST_TEST(s.requested == 0u);
}

// Note [Allocations wait for their stream's frees]: a tensor the host drops
// while a task queued on its stream still reads it keeps its memory until
// the task has run; the next allocation on that stream that finds no free
// block waits for the queue's tasks, one at a time, and takes that memory
// back instead of a new segment. Behind a task that does not finish it
// gives up after the stall.
BOOST_AUTO_TEST_CASE(an_allocation_waits_for_its_streams_queue_before_growing) {
  constexpr std::size_t MiB = 1 << 20;
  OwnedStream compute(Device::cpu());
  // Drops a tensor of 3 MiB that a queued task holds until `until` is set.
  auto drop_held = [&](const AllocatorPtr& alloc, std::shared_future<void> until) {
    Tensor t = Tensor::empty({3 * MiB}, DType::u8, Device::cpu(), alloc, compute);
    void* p = t.data_ptr();
    run_on_cpu_stream(compute, "a queued reader", [view = t.issue_view(), until] {
      until.wait();  // `view` holds the memory until then
    });
    return p;
  };
  AllocatorPtr alloc = make_caching_allocator(Device::cpu());  // a 10 s stall
  std::promise<void> release, unstick;
  void* first = drop_held(alloc, release.get_future().share());
  // Behind the reader, a task that finishes only at the end: the allocation
  // must not wait for it (a wait for the whole queue stalled, then grew).
  run_on_cpu_stream(compute, "stuck", [stuck = unstick.get_future().share()] { stuck.wait(); });
  const MemoryStats held = alloc->stats();
  BOOST_TEST(held.allocated > 0u);
  std::thread host([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release.set_value();
  });
  // No free block: waits for the reader, then takes its memory back.
  Tensor again = Tensor::empty({3 * MiB}, DType::u8, Device::cpu(), alloc, compute);
  host.join();
  unstick.set_value();
  BOOST_TEST(again.data_ptr() == first);
  BOOST_TEST(alloc->stats().reserved == held.reserved);
  BOOST_TEST(alloc->stats().num_raw_allocs == 1u);
  // A task that does not finish (a collective whose peer is gone) is given
  // up on: the pool grows, and the comm watchdog's next wait is what names
  // a stuck collective. A short stall keeps the test short.
  AllocatorPtr quick =
      make_caching_allocator(Device::cpu(), {.queue_stall = std::chrono::milliseconds(200)});
  std::promise<void> never;
  void* held_for_ever = drop_held(quick, never.get_future().share());
  auto grown = std::async(std::launch::async, [&] {
    return Tensor::empty({3 * MiB}, DType::u8, Device::cpu(), quick, compute);
  });
  const bool returned = grown.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  never.set_value();
  BOOST_TEST(returned, "an allocation waited for a stuck task");
  BOOST_TEST(grown.get().data_ptr() != held_for_ever);
  BOOST_TEST(quick->stats().num_raw_allocs == 2u);
  compute.get().synchronize();
}

// Note [No lock held while waiting]: an allocation over the cap waits for
// a block a CPU stream still uses while work queued before that use frees
// another block of the same allocator. Waiting under the allocator's lock
// hung for ever (--cpu-streams all under a tight --memory-limit); a hang
// here fails after 30 s instead of stalling the suite.
BOOST_AUTO_TEST_CASE(a_retry_over_the_cap_waits_without_the_lock) {
  constexpr std::size_t MiB = 1 << 20;
  std::promise<void> finished;
  std::future<void> done = finished.get_future();
  std::thread scenario([&] {
    AllocatorPtr a = make_caching_allocator(Device::cpu(), {.memory_cap = 4 * MiB});
    OwnedStream side(Device::cpu());
    void* held = a->allocate(MiB, Stream{});  // two 2 MiB small segments fill the cap
    void* freed_by_the_stream = a->allocate(MiB, Stream{});
    void* kept[2] = {a->allocate(MiB, Stream{}), a->allocate(MiB, Stream{})};
    BOOST_TEST(a->stats().reserved == 4 * MiB);
    // The stream's queued work frees a block (as its kernels free tensors)
    // before it reaches the use of `held` the allocator waits for, once the
    // allocation below is waiting (stats() takes the lock too).
    run_on_cpu_stream(side, "free a block", [&] {
      while (a->stats().num_oom_retries == 0) std::this_thread::yield();
      a->deallocate(freed_by_the_stream);
    });
    a->record_use(held, side);
    a->deallocate(held);
    void* p = a->allocate(MiB, Stream{});  // no room until the stream is done: the retry waits
    BOOST_TEST(p != nullptr);
    BOOST_TEST(a->stats().num_oom_retries == 1u);
    BOOST_TEST(a->stats().reserved == 4 * MiB);
    a->deallocate(p);
    for (void* k : kept) a->deallocate(k);
    finished.set_value();
  });
  if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    BOOST_ERROR("an allocation over the cap hung waiting for a CPU stream");
    std::fflush(nullptr);
    std::_Exit(1);  // the scenario's threads are stuck for good
  }
  scenario.join();
}

BOOST_AUTO_TEST_CASE(factories_give_each_caller_its_own_cache) {
  AllocatorPtr a = make_caching_allocator(Device::cpu());
  AllocatorPtr b = make_caching_allocator(Device::cpu(), {.memory_cap = 8u << 20});
  BOOST_TEST(a != b);
  a->deallocate(a->allocate(100, Stream{}));
  BOOST_TEST(a->stats().reserved > 0u);
  BOOST_TEST(b->stats().reserved == 0u);
  BOOST_CHECK_THROW(b->allocate(9u << 20, Stream{}), OutOfMemory);
  if (!cuda_available())
    BOOST_CHECK_THROW(make_caching_allocator(Device::cuda(0)), InvalidArgument);
#ifndef ZRT_WITH_CUDA
  BOOST_CHECK_THROW(make_pinned_host_allocator(), InvalidArgument);
#endif
}

BOOST_AUTO_TEST_SUITE_END()
