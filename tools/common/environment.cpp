#include "tools/common/environment.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/kernels/cpu_isa/isa_kernels.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/nn/attention_path.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/communicator.h"
#include "zrt/runtime/comm/flight_recorder.h"
#include "zrt/runtime/comm/link_model.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/io/kernel_filesystem.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::tools {
namespace {

const char* env(const char* name) { return std::getenv(name); }

constexpr EnvVariable kVariables[] = {
    {"ZRT_DEBUG", "0 or 1",
     "1: error messages also say where in zrt's source the check failed, and errors that "
     "destructors meet while another error propagates are printed too",
     [] {
       const char* v = env("ZRT_DEBUG");
       ZRT_CHECK_ARG(!*v || !std::strcmp(v, "0") || !std::strcmp(v, "1"), "ZRT_DEBUG='", v,
                     "' is not one of 0, 1 (1 adds the source location to error messages)");
     }},
    {"ZRT_COMM_TIMEOUT_S", "seconds, above 0 and at most 1e8 (default 300)",
     "how long a collective waits for the other ranks before failing",
     [] { (void)default_comm_timeout(); }},
    {"ZRT_LINK_GBPS", "0 or Gb/s from 0.001 to 1e6 (default 0: no link model)",
     "local and MPI ranks hold each collective for its bytes on the link at this bandwidth",
     [] { (void)link_model_from_env(); }},
    {"ZRT_LINK_US", "0 or microseconds up to 1e6 (default 0)",
     "local and MPI ranks hold each collective at least this latency",
     [] { (void)link_model_from_env(); }},
    {"ZRT_FLIGHT_RECORDER_ENTRIES", "a whole number from 1 to 1000000 (default 256)",
     "collectives each rank's flight recorder keeps",
     [] { (void)default_flight_recorder_entries(); }},
    {"ZRT_FLIGHT_RECORDER_DIR", "a writable directory, or a path where one can be made",
     "where the flight records of a failed collective are written",
     [] {  // checked now: it is written (and made) only when a collective has failed
       namespace fs = std::filesystem;
       const char* v = env("ZRT_FLIGHT_RECORDER_DIR");
       if (!*v) return;
       // Nothing is made here (zrt-ckpt and zrt-bench write no records):
       // what exists of the path must let the rest be made and written.
       const std::string name = detail::concat("ZRT_FLIGHT_RECORDER_DIR='", v, "'");
       refuse_kernel_filesystem(name, v);  // before "cannot write": the reason, not its effect
       std::error_code ec;
       ZRT_CHECK_ARG(fs::exists(v, ec) || !fs::is_symlink(fs::symlink_status(v, ec)), name,
                     " is a link to ", fs::read_symlink(v, ec).string(),
                     ", which does not exist: a directory cannot be made there");
       const fs::path existing = nearest_existing(v);
       if (fs::exists(v, ec)) {
         ZRT_CHECK_ARG(fs::is_directory(v, ec), name,
                       " is not a directory (the flight records of a failed collective go there)");
         ZRT_CHECK_ARG(::access(v, W_OK) == 0, name, " is a directory this process cannot write");
       } else {
         ZRT_CHECK_ARG(fs::is_directory(existing, ec), name, " cannot be made: ", existing.string(),
                       " is not a directory");
         ZRT_CHECK_ARG(::access(existing.c_str(), W_OK) == 0, name,
                       " cannot be made: this process cannot write in ", existing.string());
       }
     }},
    {"ZRT_POISON_MEMORY", "0 or 1", "1: fill every new allocation with 0xFF bytes (NaN)",
     [] { (void)env_poison_memory(); }},
    {"ZRT_CPU_THREADS", "a whole number from 1 to 1024",
     "CPU kernel threads per rank when --threads is 0 (default: the cores divided among ranks)",
     [] { (void)kernels::default_cpu_threads(1); }},
    {"ZRT_CPU_ISA", "baseline, avx2 or avx512",
     "the highest instruction set the CPU kernels use (default: the best the CPU runs)",
     [] { (void)kernels::isa_kernels_capped(env("ZRT_CPU_ISA")); }},
    {"ZRT_CPU_GEMM", "eigen or openblas", "the CPU GEMM backend (default: openblas where built)",
     [] { (void)kernels::cpu_gemm_named(env("ZRT_CPU_GEMM")); }},
    {"ZRT_CPU_STREAMS", "none, comm or all",
     "on cpu, which work runs on threads of its own when --cpu-streams is not given",
     [] { (void)optim::default_cpu_streams(); }},
    {"ZRT_SIMPLE_KERNELS",
     "kernel names separated by commas: cross_entropy, layernorm, elementwise, attention, "
     "embedding_backward, gemm_epilogue, or all",
     "CUDA kernels that run their simple reference version instead of the fast one",
     [] { (void)kernels::parse_simple_kernels(env("ZRT_SIMPLE_KERNELS")); }},
    {"ZRT_ATTENTION_PATH", "gemm, flash, tiled, simple or cpu_blocked",
     "the attention path every attention call takes (default: chosen per call)",
     [] { (void)kernels::env_attention_path(env("ZRT_ATTENTION_PATH")); }},
    {"ZRT_TF32", "0 or 1 (also false/true, off/on)",
     "1: fp32 CUDA GEMMs round their inputs to TF32, as --tf32",
     [] { (void)kernels::parse_tf32(env("ZRT_TF32")); }},
    {"ZRT_TEST_SKIP_GATHER_WAIT", "set or unset",
     "a test hook: the all-gather wait is left out, to show a test catches its absence", nullptr},
    // Read by the scripts around the programs; named so that they are not
    // taken for typos.
    {"ZRT_BUILD_DIR", "a directory", "tools/setup.sh, zrt-test.sh, zrt-run.sh: the build folder",
     nullptr},
    {"ZRT_CMAKE_ARGS", "CMake arguments", "tools/setup.sh: extra configure arguments", nullptr},
    {"ZRT_ASAN_BUILD_DIR", "a directory", "tools/sanitize.sh: the AddressSanitizer build folder",
     nullptr},
    {"ZRT_TSAN_BUILD_DIR", "a directory", "tools/sanitize.sh: the ThreadSanitizer build folder",
     nullptr},
    {"ZRT_GPU_BUNDLE_BUILD", "a directory", "tools/gpu-bundle.sh: its build folder", nullptr},
    {"ZRT_GPU_CHECK_STAGES", "stage names separated by commas",
     "tools/gpu-check.sh: the stages to run, in that order (default "
     "`suites,bench,train,sanitize`; also `scale`)",
     nullptr},
    {"ZRT_GPU_CHECK_BUDGET", "whole seconds (default 540)",
     "tools/gpu-check.sh: the whole run's time; steps with under 10 s left are skipped", nullptr},
    {"ZRT_TEST_SEED", "a whole number", "the tests: the seed of their random inputs", nullptr},
};

}  // namespace

std::span<const EnvVariable> environment_variables() { return kVariables; }

std::vector<std::string> check_environment_variables() {
  for (const EnvVariable& v : kVariables)
    if (v.check && env(v.name)) v.check();
  std::vector<std::string> warnings;
  for (char** e = ::environ; e && *e; ++e) {
    const std::string_view entry(*e);
    if (!entry.starts_with("ZRT_")) continue;
    const std::string_view name = entry.substr(0, entry.find('='));
    bool known = false;
    for (const EnvVariable& v : kVariables) known = known || name == v.name;
    if (!known)
      warnings.push_back(std::string(name) +
                         " is set but zrt reads no such variable (a typo?); docs/zrt-train.md "
                         "lists the ZRT_* variables");
  }
  return warnings;
}

void check_environment(std::string_view program) {
  for (const std::string& w : check_environment_variables())
    std::fprintf(stderr, "%.*s: warning: %s\n", static_cast<int>(program.size()), program.data(),
                 w.c_str());
}

}  // namespace zrt::tools
