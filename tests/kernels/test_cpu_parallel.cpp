// The kernel threads (Note [Kernel threads per rank]): chunks cover [0, n)
// exactly once on grain boundaries for every thread count, the pool is reused
// and resized per calling thread, errors propagate, nested calls run
// serially, two "ranks" (threads) with their own counts run side by side, and
// the default divides the process's cores among the ranks sharing them.
#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/runtime/error.h"

using namespace zrt;
using kernels::parallel_for;

namespace {

// Runs parallel_for and checks its chunks; returns the distinct threads used.
std::size_t check_cover(std::int64_t n, std::int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::mutex m;
  std::set<std::thread::id> ids;
  parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) {
    BOOST_TEST((b < e && b % grain == 0), "chunk [" << b << ", " << e << ")");
    for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  for (std::int64_t i = 0; i < n; ++i)
    BOOST_TEST(hits[static_cast<std::size_t>(i)] == 1, "element " << i << " of " << n);
  return ids.size();
}

}  // namespace

BOOST_AUTO_TEST_CASE(chunks_cover_once_for_every_thread_count) {
  for (int threads : {1, 2, 3, 7}) {
    kernels::set_cpu_threads(threads);
    BOOST_TEST(kernels::cpu_threads() == threads);
    for (std::int64_t n : {1, 3, 65537, 400003}) {
      for (std::int64_t grain : {1, 7, 1000}) {
        const std::size_t used = check_cover(n, grain);
        BOOST_TEST(used <= std::size_t(threads));
        if (n >= 400003 && grain == 1) BOOST_TEST(used == std::size_t(threads));
      }
    }
  }
  kernels::set_cpu_threads(0);
}

BOOST_AUTO_TEST_CASE(errors_propagate_and_the_pool_survives) {
  kernels::set_cpu_threads(3);
  for (int round = 0; round < 3; ++round) {
    BOOST_CHECK_THROW(parallel_for(300000, 1,
                                   [](std::int64_t b, std::int64_t) {
                                     if (b > 0) throw std::runtime_error("worker chunk failed");
                                   }),
                      std::runtime_error);
    BOOST_TEST(check_cover(300000, 1) == 3u);
  }
  BOOST_CHECK_THROW(kernels::set_cpu_threads(-1), InvalidArgument);
  kernels::set_cpu_threads(0);
}

BOOST_AUTO_TEST_CASE(nested_calls_run_serially_on_workers) {
  kernels::set_cpu_threads(2);
  std::atomic<std::int64_t> total{0};
  parallel_for(200000, 1, [&](std::int64_t b, std::int64_t e) {
    std::int64_t inner = 0;
    parallel_for(e - b, 1, [&](std::int64_t ib, std::int64_t ie) { inner += ie - ib; });
    total += inner;
  });
  BOOST_TEST(total.load() == 200000);
  kernels::set_cpu_threads(0);
}

BOOST_AUTO_TEST_CASE(each_calling_thread_has_its_own_count_and_pool) {
  std::atomic<int> failures{0};
  auto rank = [&](int threads) {
    kernels::set_cpu_threads(threads);
    for (int i = 0; i < 20; ++i) {
      std::set<std::thread::id> ids;
      std::mutex m;
      parallel_for(200000, 1, [&](std::int64_t, std::int64_t) {
        std::lock_guard<std::mutex> lock(m);
        ids.insert(std::this_thread::get_id());
      });
      if (ids.size() != std::size_t(threads) || kernels::cpu_threads() != threads) ++failures;
    }
  };
  std::thread a(rank, 2), b(rank, 3);
  a.join();
  b.join();
  BOOST_TEST(failures.load() == 0);
}

BOOST_AUTO_TEST_CASE(default_threads_share_the_cores_among_ranks) {
  const char* saved = std::getenv("ZRT_CPU_THREADS");
  const std::string restore = saved ? saved : "";
  ::unsetenv("ZRT_CPU_THREADS");
  const int all = kernels::default_cpu_threads(1);
  BOOST_TEST(all >= 1);
  BOOST_TEST(kernels::default_cpu_threads(2) == std::max(1, all / 2));
  BOOST_TEST(kernels::default_cpu_threads(100000) == 1);
  BOOST_TEST(kernels::cpu_threads() == all);
  ::setenv("ZRT_CPU_THREADS", "3", 1);
  BOOST_TEST(kernels::default_cpu_threads(5) == 3);
  BOOST_TEST(kernels::cpu_threads() == 3);
  if (saved)
    ::setenv("ZRT_CPU_THREADS", restore.c_str(), 1);
  else
    ::unsetenv("ZRT_CPU_THREADS");
}
