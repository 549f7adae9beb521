// The CPU twins' threading: split [0, n) into contiguous chunks, one per
// kernel thread. Chunks are aligned to `grain` elements so vector loops and
// deterministic per-chunk reductions see the same boundaries for a given n
// and thread count.
//
// Note [Kernel threads per rank]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every thread that calls parallel_for (a rank: the process under mpirun, or
// one thread of --ranks N) owns its kernel workers: set_cpu_threads(T) on
// that thread sizes them, and they persist between calls, parked on a
// condition variable, so a kernel costs a wake-up rather than thread
// creation. Nothing is shared between ranks, so several ranks in one process
// never contend for one pool. A parallel_for called from a worker runs
// serially, on a worker or on the caller inside its own chunk (no nested
// pools).
#pragma once

#include <cstdint>
#include <functional>

namespace zrt::kernels {

// The calling thread's kernel thread count: set_cpu_threads on this thread,
// else default_cpu_threads(1).
int cpu_threads();

// The most kernel threads one rank runs (ZRT_CPU_THREADS, --threads).
inline constexpr int kMaxCpuThreads = 1024;

// ZRT_CPU_THREADS when set (InvalidArgument unless a whole number from 1 to
// kMaxCpuThreads), else this process's cores (its CPU affinity, as
// mpirun or taskset left it) divided among `ranks_sharing` ranks, at least 1.
int default_cpu_threads(int ranks_sharing);

// Sets the calling thread's kernel thread count (0: back to the default).
// Throws InvalidArgument for a negative count.
void set_cpu_threads(int threads);

// Calls fn(begin, end) over disjoint chunks covering [0, n), concurrently on
// the calling thread's workers when n is large enough to be worth it.
// Exceptions from fn propagate (the first chunk's first).
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace zrt::kernels
