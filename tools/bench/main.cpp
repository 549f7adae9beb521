// zrt-bench SUITE [options]: the benchmarks that check zrt's speed and memory
// targets. Each suite times its subject against a baseline measured in the
// same run (a plain copy of the same bytes, the raw backend call, ...), since
// absolute numbers on shared machines are noise.
#include <cstdio>
#include <cstring>
#include <exception>

#include <string>

#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "tools/common/environment.h"
#include "tools/common/report_error.h"
#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/runtime/error.h"

namespace {

struct Suite {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

constexpr Suite kSuites[] = {
    {"comm", zrt::bench::bench_comm, "collectives: algbw/busbw vs the raw backend call"},
    {"optim", zrt::bench::bench_optim, "full ZeroAdamW step vs the AdamW kernel alone"},
    {"ckpt", zrt::bench::bench_ckpt, "checkpoint save/load vs plain write+fsync/read"},
    {"train", zrt::bench::bench_train,
     "training steps: tokens/s, GFLOP/s vs the measured fp32 peak, memory"},
    {"gemm", zrt::bench::bench_gemm, "GPT GEMMs vs the measured fp32 FMA peak"},
    {"attention", zrt::bench::bench_attention, "causal attention's paths vs one Q·Kᵀ batched GEMM"},
    {"ops", zrt::bench::bench_ops,
     "every registered op at its perf size vs a copy of its bytes or a GEMM of its FLOPs"},
    {"tensor", zrt::bench::bench_tensor,
     "Tensor handle: sizeof, ns per copy/view vs a shared_ptr copy"},
};

// On stdout when asked for (--help), on stderr after a mistake.
void usage(std::FILE* out) {
  std::fprintf(out, "usage: zrt-bench SUITE [options]   (SUITE --help for its options)\nsuites:\n");
  for (const auto& s : kSuites) std::fprintf(out, "  %-8s %s\n", s.name, s.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& s : kSuites) {
    if (!std::strcmp(argv[1], s.name)) {
      const std::string program = std::string("zrt-bench ") + s.name;
      try {
        zrt::tools::check_environment(program);  // Note [Environment variables]
        // Before any thread: Note [OpenBLAS loaded on first use].
        (void)zrt::kernels::cpu_gemm();
        return s.run(argc - 1, argv + 1);
      } catch (const zrt::InvalidArgument& e) {  // a bad command line, as zrt-train's
        zrt::tools::report_error(program, e);
        return 2;
      } catch (const std::exception& e) {
        zrt::tools::report_error(program, e);
        return 1;
      }
    }
  }
  std::fprintf(stderr, "zrt-bench: unknown suite '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
