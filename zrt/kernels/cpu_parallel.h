// The CPU twins' threading: split [0, n) into contiguous chunks, one per
// worker thread. Chunks are aligned to `grain` elements so vector loops and
// deterministic per-chunk reductions see the same boundaries for a given n.
#pragma once

#include <cstdint>
#include <functional>

namespace zrt::kernels {

// Number of worker threads the CPU twins use (hardware concurrency, or
// ZRT_CPU_THREADS when set).
int cpu_threads();

// Calls fn(begin, end) over disjoint chunks covering [0, n), concurrently when
// n is large enough to be worth threads. Exceptions from fn propagate.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace zrt::kernels
