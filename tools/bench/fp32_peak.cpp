#include "tools/bench/fp32_peak.h"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ZRT_BENCH_X86 1
#endif

namespace zrt::bench {

// Note [Measured fp32 peak]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// zrt-bench train reports achieved GFLOP/s as a fraction of a peak measured
// in the same process rather than a datasheet figure: the machine may be a
// VM with unknown clocks, turbo and SMT siblings. The loop keeps kChains
// independent accumulators (more than FMA latency × FMA ports: 4-5 cycles ×
// 2 on current x86 cores) in vector registers and runs acc = acc·a + b on
// each, so it is bound by the FMA units alone. Each ISA's loop is compiled
// with a target attribute and picked at run time (__builtin_cpu_supports), so
// a baseline x86-64 build still measures AVX2/AVX-512. Threads start
// together behind a barrier and the figure is total FLOPs over the wall time
// of the whole group, which is what the same number of kernel threads could
// reach at best: on SMT siblings or an oversubscribed machine it is the
// shared cores' peak, not threads × one core's.
namespace {

constexpr int kChains = 12;

// The body of the loop for one register type V of LANES floats: kChains
// accumulators advanced `iters` times by MULADD (acc·a + b), then summed so
// the work stays live. One body for every ISA; each function below compiles
// it with its own target.
#define ZRT_FMA_CHAINS(V, LANES, SET1, MULADD, STORE)                                         \
  V acc[kChains];                                                                             \
  for (int k = 0; k < kChains; ++k) acc[k] = SET1(1.0f + 0.001f * static_cast<float>(k));     \
  const V a = SET1(0.9999999f), b = SET1(1e-7f);                                              \
  for (std::int64_t i = 0; i < iters; ++i) {                                                  \
    _Pragma("GCC unroll 12") for (int k = 0; k < kChains; ++k) acc[k] = MULADD(acc[k], a, b); \
  }                                                                                           \
  float out[(LANES)*kChains];                                                                 \
  for (int k = 0; k < kChains; ++k) STORE(out + (LANES)*k, acc[k]);                           \
  float sum = 0;                                                                              \
  for (float v : out) sum += v;                                                               \
  return sum

#ifdef ZRT_BENCH_X86
__attribute__((target("avx512f"))) float fma_avx512(std::int64_t iters) {
  ZRT_FMA_CHAINS(__m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps);
}

__attribute__((target("avx2,fma"))) float fma_avx2(std::int64_t iters) {
  ZRT_FMA_CHAINS(__m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps);
}

inline __m128 mul_add_ps(__m128 x, __m128 a, __m128 b) { return _mm_add_ps(_mm_mul_ps(x, a), b); }

float mul_add_sse2(std::int64_t iters) {
  ZRT_FMA_CHAINS(__m128, 4, _mm_set1_ps, mul_add_ps, _mm_storeu_ps);
}
#else
inline float mul_add(float x, float a, float b) { return x * a + b; }
inline float same(float x) { return x; }
inline void store(float* p, float v) { *p = v; }

float mul_add_scalar(std::int64_t iters) { ZRT_FMA_CHAINS(float, 1, same, mul_add, store); }
#endif

// A loop over one register width: its lanes and its body.
struct FmaLoop {
  const char* isa;
  int lanes;
  float (*run)(std::int64_t iters);
};

FmaLoop best_loop() {
#ifdef ZRT_BENCH_X86
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", 16, fma_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2+fma", 8, fma_avx2};
  return {"sse2", 4, mul_add_sse2};
#else
  return {"scalar", 1, mul_add_scalar};
#endif
}

// Keeps the loops' results alive.
volatile float sink = 0;

}  // namespace

std::string fma_isa() { return best_loop().isa; }

FmaLoopRun run_fma_loop(int threads, double seconds) {
  const FmaLoop loop = best_loop();
  threads = std::max(threads, 1);
  const double flops_per_iter = 2.0 * kChains * loop.lanes;
  // Calibrate on one thread: a loop of 2^20 iterations, then scale.
  auto t0 = std::chrono::steady_clock::now();
  std::int64_t calib = 1 << 20;
  sink = sink + loop.run(calib);
  const double calib_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto iters = std::max<std::int64_t>(
      calib, static_cast<std::int64_t>(calib * seconds / std::max(calib_s, 1e-6)));
  std::barrier start(threads);
  std::vector<float> results(static_cast<std::size_t>(threads));
  // Each thread clocks its own loop: a clock started by the releasing
  // thread would miss the loops run while that thread waits to be scheduled.
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> begins(static_cast<std::size_t>(threads)),
      ends(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      const auto i = static_cast<std::size_t>(t);
      begins[i] = Clock::now();
      results[i] = loop.run(iters);
      ends[i] = Clock::now();
    });
  for (auto& t : pool) t.join();
  for (float v : results) sink = sink + v;
  FmaLoopRun r;
  r.seconds = std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) -
                                            *std::min_element(begins.begin(), begins.end()))
                  .count();
  r.flops = flops_per_iter * static_cast<double>(iters) * threads;
  return r;
}

}  // namespace zrt::bench
