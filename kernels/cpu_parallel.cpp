#include "zrt/kernels/cpu_parallel.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "zrt/runtime/error.h"

namespace zrt::kernels {
namespace {

// True on pool workers, and on a caller while it runs its own chunk: their
// parallel_for calls run serially.
bool& in_parallel_region() {
  thread_local bool inside = false;
  return inside;
}

// Workers parked between calls (Note [Kernel threads per rank]). run() hands
// chunk w of the current job to worker w (1-based; the caller runs chunk 0)
// and returns when every chunk is done.
class WorkerPool {
 public:
  explicit WorkerPool(int workers) {
    try {
      for (int w = 1; w <= workers; ++w) threads_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error& e) {
      stop();
      ZRT_THROW(ResourceError, "kernel threads: cannot start ", workers, " workers: ", e.what(),
                " (raise the process's thread or memory limit, ulimit -u or ulimit -v, or use "
                "fewer kernel threads: zrt-train --threads, ZRT_CPU_THREADS)");
    }
  }
  ~WorkerPool() { stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int workers() const { return static_cast<int>(threads_.size()); }

  // chunk(w) for w in [0, chunks), chunks <= workers() + 1.
  void run(int chunks, const std::function<void(int)>& chunk) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &chunk;
      chunks_ = chunks;
      pending_ = chunks - 1;
      errors_.assign(static_cast<std::size_t>(chunks), nullptr);
      ++generation_;
    }
    wake_.notify_all();
    in_parallel_region() = true;
    try {
      chunk(0);
    } catch (...) {
      errors_[0] = std::current_exception();
    }
    in_parallel_region() = false;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void work(int w) {
    in_parallel_region() = true;
    std::uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      if (w >= chunks_) continue;
      const std::function<void(int)>* job = job_;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*job)(w);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      errors_[static_cast<std::size_t>(w)] = error;
      if (--pending_ == 0) done_.notify_one();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  int chunks_ = 0, pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

// The calling thread's settings and pool.
struct ThreadKernels {
  int threads = 0;  // 0: the default
  std::unique_ptr<WorkerPool> pool;
};

ThreadKernels& this_thread_kernels() {
  thread_local ThreadKernels state;
  return state;
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

WorkerPool& pool_of_size(int workers) {
  ThreadKernels& state = this_thread_kernels();
  if (!state.pool || state.pool->workers() != workers) {
    state.pool.reset();
    state.pool = std::make_unique<WorkerPool>(workers);
  }
  return *state.pool;
}

}  // namespace

int default_cpu_threads(int ranks_sharing) {
  if (const char* env = std::getenv("ZRT_CPU_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(env, &end, 10);
    ZRT_CHECK_ARG(errno == 0 && end != env && *end == '\0' && n >= 1 && n <= kMaxCpuThreads,
                  "ZRT_CPU_THREADS='", env, "' is not a whole number of kernel threads from 1 to ",
                  kMaxCpuThreads);
    return static_cast<int>(n);
  }
  return std::max(1, usable_cores() / std::max(1, ranks_sharing));
}

int cpu_threads() {
  const int set = this_thread_kernels().threads;
  return set > 0 ? set : default_cpu_threads(1);
}

void set_cpu_threads(int threads) {
  ZRT_CHECK_ARG(threads >= 0 && threads <= kMaxCpuThreads, "kernel threads: ", threads,
                " is not in [0, ", kMaxCpuThreads, "]");
  this_thread_kernels().threads = threads;
}

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  // Below ~64K elements a chunk costs more in hand-off than it saves.
  constexpr std::int64_t kMinPerThread = 1 << 16;
  std::int64_t chunks =
      std::min<std::int64_t>(cpu_threads(), (n + kMinPerThread - 1) / kMinPerThread);
  if (chunks <= 1 || in_parallel_region()) {
    fn(0, n);
    return;
  }
  std::int64_t chunk = (n + chunks - 1) / chunks;
  chunk = (chunk + grain - 1) / grain * grain;
  chunks = (n + chunk - 1) / chunk;
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  pool_of_size(cpu_threads() - 1).run(static_cast<int>(chunks), [&](int w) {
    const std::int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b < e) fn(b, e);
  });
}

}  // namespace zrt::kernels
