// The OpenBLAS backend (Note [CPU GEMM backends]); built only where OpenBLAS
// was found, and opened on first use (Note [OpenBLAS loaded on first use]).
//
// Note [OpenBLAS loaded on first use]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// OpenBLAS is not linked: the first GEMM opens it (dlopen, the library found
// at build time, else libopenblas.so.0), because of how it takes memory.
// Every thread inside one of its calls holds a 128 MiB buffer, mapped on
// first use and kept; where the map fails (an address-space limit, `ulimit
// -v`: Note [Address-space limit]), OpenBLAS 0.3.21 retries it forever,
// silently. Linked, its load-time constructor also started a worker per
// core, each mapping its buffer at once: under a limit even zrt-ckpt, which
// multiplies nothing, spun at exit joining them. So:
// - OPENBLAS_NUM_THREADS=1 while it loads: no worker (zrt runs each call on
//   its calling thread anyway), and tools that never multiply never load it;
// - under a limit, the buffers of as many concurrent callers as half of what
//   the limit leaves can hold (at most one per core) are mapped at once, and
//   no more callers run in OpenBLAS at a time (the others wait), so no later
//   call maps one; where not even one fits, OpenBLAS is unavailable: the
//   default GEMM is Eigen's and ZRT_CPU_GEMM=openblas is refused, naming the
//   limit. A limit lowered after the first GEMM is not seen.
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
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

void* open_without_workers(std::string& error) {
  const char* kThreads = "OPENBLAS_NUM_THREADS";
  const char* given = std::getenv(kThreads);
  const std::optional<std::string> saved = given ? std::optional<std::string>(given) : std::nullopt;
  setenv(kThreads, "1", 1);
  void* lib = nullptr;
  for (const char* name : {ZRT_OPENBLAS_LIBRARY, "libopenblas.so.0"}) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (error.empty()) error = dlerror();
  }
  if (saved)
    setenv(kThreads, saved->c_str(), 1);
  else
    unsetenv(kThreads);
  return lib;
}

OpenBlas load() {
  OpenBlas b;
  std::size_t slots = 0;  // 0: no limit, no cap
  const std::optional<AddressSpaceLimit> as = address_space_limit();
  if (as) {
    const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    slots = std::min(cores, as->left() / 2 / kCallerBuffer);
    if (slots == 0) {
      b.unavailable = detail::concat(
          "OpenBLAS needs 128 MiB of address space for each thread that multiplies, and ",
          as->describe(), " leaves ", as->left() >> 20,
          " MiB (half of it may go to OpenBLAS): raise ulimit -v or use ZRT_CPU_GEMM=eigen");
      return b;
    }
  }
  std::string error;
  void* lib = open_without_workers(error);
  if (!lib) {
    b.unavailable = "cannot load OpenBLAS: " + error;
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
    // Each caller's buffer mapped now, kept by OpenBLAS for the next ones.
    auto alloc = symbol<void* (*)(int)>(lib, "blas_memory_alloc");
    auto release = symbol<void (*)(void*)>(lib, "blas_memory_free");
    if (alloc && release) {
      std::vector<void*> held;
      for (std::size_t i = 0; i < slots; ++i) held.push_back(alloc(0));
      for (void* p : held) release(p);
    }
    b.callers = std::make_unique<std::counting_semaphore<>>(static_cast<std::ptrdiff_t>(slots));
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
