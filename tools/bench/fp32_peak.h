// The CPU's fp32 peak as this process can reach it: independent chains of
// fused multiply-adds in vector registers, no memory traffic (Note [Measured
// fp32 peak]).
#pragma once

#include <cstdint>
#include <string>

namespace zrt::bench {

struct FmaLoopRun {
  double flops = 0;    // floating-point operations done (an FMA counts 2)
  double seconds = 0;  // wall time from the first thread's start to the last one's end
};

// The widest FMA loop this CPU runs: "avx512f", "avx2+fma", or "sse2" (a
// multiply and an add, when there is no FMA).
std::string fma_isa();

// Runs the loop on `threads` threads at once, about `seconds` long.
FmaLoopRun run_fma_loop(int threads, double seconds);

}  // namespace zrt::bench
