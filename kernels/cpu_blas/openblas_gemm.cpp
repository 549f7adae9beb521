// The OpenBLAS backend (Note [CPU GEMM backends]); built only where OpenBLAS
// was found, and opened on first use (Note [OpenBLAS loaded on first use]).
//
// Note [OpenBLAS loaded on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// OpenBLAS is not linked: the first GEMM opens it (dlopen: the runtime name
// beside the library found at build time, else libopenblas.so.0), because
// of how it takes memory.
// Every thread inside one of its calls holds a 128 MiB buffer, mapped on
// first use and kept; where the map fails (an address-space limit, `ulimit
// -v`: Note [Address-space limit]), OpenBLAS 0.3.21 retries it forever,
// silently. Linked, its load-time constructor also started a worker per
// core, each mapping its buffer at once: under a limit even zrt-ckpt, which
// multiplies nothing, spun at exit joining them. So:
// - OPENBLAS_NUM_THREADS=1 while it loads: no worker (zrt runs each call on
//   its calling thread anyway), and tools that never multiply never load it.
//   The environment is changed only while the process has one thread
//   (setenv is unsafe beside readers); loaded later, under a limit, it must
//   be set already, and without a limit the idle workers are let be;
// - under a limit, the buffers of as many concurrent callers as half of what
//   the limit leaves can hold (at most one per usable core, 64 at most) are
//   mapped at once, and
//   no more callers run in OpenBLAS at a time (the others wait), so no later
//   call maps one; where not even one fits, OpenBLAS is unavailable: the
//   default GEMM is Eigen's and ZRT_CPU_GEMM=openblas is refused, naming the
//   limit. A limit lowered after the first GEMM is not seen;
// - another OpenBLAS loaded into the process already (a program linking
//   -lblas) would lend the one opened here its buffer pool: then the one
//   already there is used if it is a pthread build, else none.
#include <cblas.h>
#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/memory/address_space.h"

namespace zrt::kernels {
namespace {

// OpenBLAS's BUFFER_SIZE (32 << 22 on x86-64) and the page its malloc path adds.
constexpr std::size_t kCallerBuffer = (std::size_t{128} << 20) + 4096;

struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  // Under an address-space limit: one count per caller whose buffer is mapped.
  std::unique_ptr<std::counting_semaphore<>> callers;
  std::string unavailable;  // why it cannot be used; empty when it can
};

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

bool single_threaded_process() {
  std::ifstream status("/proc/self/status");
  for (std::string key, value; status >> key >> value;)
    if (key == "Threads:") return value == "1";
  return false;
}

// Opens the pthread build found at build time, by its runtime name first
// (the build-time name may be the -dev package's link); the first error is kept.
void* open_library(std::string& error) {
  const std::string dir = ZRT_OPENBLAS_DIRECTORY;
  for (const std::string& name :
       {dir + "/libopenblas.so.0", dir + "/libopenblasp.so.0", std::string(ZRT_OPENBLAS_LIBRARY),
        std::string("libopenblas.so.0")}) {
    if (void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    if (error.empty()) error = name + ": " + dlerror();
  }
  return nullptr;
}

// With no load-time workers where that can be arranged (see the Note);
// `unavailable` says why not where it matters.
void* open_without_workers(bool limited, std::string& error, std::string& unavailable) {
  const char* kThreads = "OPENBLAS_NUM_THREADS";
  const char* given = std::getenv(kThreads);
  if ((given && std::string(given) == "1") || !single_threaded_process()) {
    if (limited && !(given && std::string(given) == "1")) {
      unavailable =
          "OpenBLAS, first used after threads started, would start a worker per core, each "
          "mapping a 128 MiB buffer under the address-space limit: set OPENBLAS_NUM_THREADS=1";
      return nullptr;
    }
    return open_library(error);
  }
  const std::optional<std::string> saved = given ? std::optional<std::string>(given) : std::nullopt;
  setenv(kThreads, "1", 1);
  void* lib = open_library(error);
  if (saved)
    setenv(kThreads, saved->c_str(), 1);
  else
    unsetenv(kThreads);
  return lib;
}

std::size_t usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

OpenBlas load() {
  OpenBlas b;
  std::size_t slots = 0;  // 0: no limit, no cap
  const std::optional<AddressSpaceLimit> as = address_space_limit();
  if (as) {
    // 64: well inside OpenBLAS's table of buffers (2 x its MAX_THREADS).
    slots = std::min({usable_cores(), std::size_t{64}, as->left() / 2 / kCallerBuffer});
    if (slots == 0) {
      b.unavailable = detail::concat(
          "OpenBLAS needs 128 MiB of address space for each thread that multiplies, and zrt "
          "gives it at most half of what is left: ",
          as->describe(), " leaves ", as->left() >> 20, " MiB; raise the limit by ",
          (2 * kCallerBuffer - as->left() + (std::size_t{1} << 20) - 1) >> 20,
          " MiB or more, or use ZRT_CPU_GEMM=eigen");
      return b;
    }
  }
  std::string error;
  // One already loaded into the process (RTLD_NOLOAD: not loaded here).
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = open_without_workers(as.has_value(), error, b.unavailable);
  if (!b.unavailable.empty()) return b;
  if (!lib) {
    b.unavailable = "cannot load OpenBLAS: " + error;
    return b;
  }
  // A copy loaded beside another OpenBLAS would borrow that one's buffers.
  if (void* other = dlsym(RTLD_DEFAULT, "blas_memory_alloc");
      other && other != dlsym(lib, "blas_memory_alloc")) {
    b.unavailable = "another OpenBLAS is loaded into this process already";
    return b;
  }
  auto config = symbol<const char* (*)()>(lib, "openblas_get_config");
  auto set_threads = symbol<void (*)(int)>(lib, "openblas_set_num_threads");
  b.sgemm = symbol<decltype(b.sgemm)>(lib, "cblas_sgemm");
  b.dgemm = symbol<decltype(b.dgemm)>(lib, "cblas_dgemm");
  if (!config || !set_threads || !b.sgemm || !b.dgemm) {
    b.unavailable = "the OpenBLAS loaded lacks openblas_get_config, cblas_sgemm or cblas_dgemm";
    return b;
  }
  // A serial build (its config says SINGLE_THREADED) is not safe to call from
  // several threads; the pthread build runs single-threaded calls in the caller.
  if (std::strstr(config(), "SINGLE_THREADED")) {
    b.unavailable = "the OpenBLAS loaded is a single-threaded build, unsafe from several threads";
    return b;
  }
  set_threads(1);
  if (slots > 0) {
    // Each caller's buffer mapped now, kept by OpenBLAS for the next ones;
    // without the functions to do so, no promise can be kept under a limit.
    auto alloc = symbol<void* (*)(int)>(lib, "blas_memory_alloc");
    auto release = symbol<void (*)(void*)>(lib, "blas_memory_free");
    if (!alloc || !release) {
      b.unavailable =
          "the OpenBLAS loaded cannot map its buffers ahead (no blas_memory_alloc), "
          "which the address-space limit needs";
      return b;
    }
    std::vector<void*> held;
    for (std::size_t i = 0; i < slots; ++i) {
      void* p = alloc(0);
      if (!p) break;
      held.push_back(p);
    }
    for (void* p : held) release(p);
    if (held.empty()) {
      b.unavailable = "OpenBLAS could not map a buffer under " + as->describe();
      return b;
    }
    b.callers =
        std::make_unique<std::counting_semaphore<>>(static_cast<std::ptrdiff_t>(held.size()));
  }
  return b;
}

OpenBlas& library() {
  static OpenBlas loaded = load();
  return loaded;
}

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

// One call on the calling thread; c = beta * c where k is 0 (BLAS would
// refuse a zero leading dimension) or a size exceeds BLAS's int.
template <class T, class Blas>
void openblas_gemm(const GemmCall<T>& g, Blas blas) {
  if (g.k == 0 || !(fits_int(g.m) && fits_int(g.n) && fits_int(g.k) && fits_int(g.lda) &&
                    fits_int(g.ldb) && fits_int(g.ldc))) {
    isa_kernels().table<T>().gemm(g);
    return;
  }
  std::counting_semaphore<>* callers = library().callers.get();
  if (callers) callers->acquire();
  struct Leave {
    std::counting_semaphore<>* callers;
    ~Leave() {
      if (callers) callers->release();
    }
  } leave{callers};
  blas(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
       static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), g.alpha, g.a,
       static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.beta, g.c, static_cast<int>(g.ldc));
}

void sgemm(const GemmCall<float>& g) { openblas_gemm(g, library().sgemm); }
void dgemm(const GemmCall<double>& g) { openblas_gemm(g, library().dgemm); }

constexpr CpuGemmBackend kOpenBlas{CpuGemm::openblas, "openblas", sgemm, dgemm};

}  // namespace

const CpuGemmBackend* openblas_gemm_backend() {
  return library().unavailable.empty() ? &kOpenBlas : nullptr;
}

const char* openblas_unavailable_reason() { return library().unavailable.c_str(); }

}  // namespace zrt::kernels
