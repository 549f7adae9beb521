#include "zrt/kernels/cpu_parallel.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

namespace zrt::kernels {

int cpu_threads() {
  if (const char* env = std::getenv("ZRT_CPU_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  // Below ~64K elements a thread start costs more than it saves.
  constexpr std::int64_t kMinPerThread = 1 << 16;
  std::int64_t workers = std::min<std::int64_t>(cpu_threads(), (n + kMinPerThread - 1) / kMinPerThread);
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  std::int64_t chunk = (n + workers - 1) / workers;
  chunk = (chunk + grain - 1) / grain * grain;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  std::vector<std::thread> threads;
  for (std::int64_t w = 1; w < workers; ++w) {
    std::int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    threads.emplace_back([&, w, b, e] {
      try {
        fn(b, e);
      } catch (...) {
        errors[static_cast<std::size_t>(w)] = std::current_exception();
      }
    });
  }
  try {
    fn(0, std::min(n, chunk));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace zrt::kernels
