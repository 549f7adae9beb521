#include "zrt/kernels/cpu_isa/isa_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "zrt/runtime/error.h"

namespace zrt::kernels {

// Each copy's table (isa_kernels_<isa>.cpp); the wider ones exist on x86-64.
namespace baseline {
const IsaKernels& kernels();
}
#ifdef ZRT_CPU_ISA_X86
namespace avx2 {
const IsaKernels& kernels();
}
namespace avx512 {
const IsaKernels& kernels();
}
#endif

namespace {

bool cpu_runs(CpuIsa isa) {
#ifdef ZRT_CPU_ISA_X86
  // libgcc's checks include the OS saving the wider registers (XCR0).
  switch (isa) {
    case CpuIsa::baseline:
      return true;
    case CpuIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == CpuIsa::baseline;
#endif
}

const IsaKernels& copy_of([[maybe_unused]] CpuIsa isa) {  // unread with one copy
#ifdef ZRT_CPU_ISA_X86
  if (isa == CpuIsa::avx512) return avx512::kernels();
  if (isa == CpuIsa::avx2) return avx2::kernels();
#endif
  return baseline::kernels();
}

}  // namespace

const IsaKernels& isa_kernels_capped(const char* cap) {
  CpuIsa limit = CpuIsa::avx512;
  if (cap && *cap) {
    const CpuIsa levels[] = {CpuIsa::baseline, CpuIsa::avx2, CpuIsa::avx512};
    const char* names[] = {"baseline", "avx2", "avx512"};
    const auto* it = std::find_if(std::begin(names), std::end(names),
                                  [&](const char* n) { return !std::strcmp(n, cap); });
    ZRT_CHECK_ARG(it != std::end(names), "ZRT_CPU_ISA='", cap,
                  "' is not one of baseline, avx2, avx512");
    limit = levels[it - std::begin(names)];
  }
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2})
    if (isa <= limit && cpu_runs(isa)) return copy_of(isa);
  return copy_of(CpuIsa::baseline);
}

const IsaKernels& isa_kernels() {
  static const IsaKernels& chosen = isa_kernels_capped(std::getenv("ZRT_CPU_ISA"));
  return chosen;
}

const IsaKernels* isa_kernels_for(CpuIsa isa) {
  if (!cpu_runs(isa)) return nullptr;
  const IsaKernels& k = copy_of(isa);
  return k.isa == isa ? &k : nullptr;
}

}  // namespace zrt::kernels
