#include "zrt/kernels/kernel_path.h"

#include <cstdlib>
#include <string_view>

#include "zrt/runtime/error.h"

namespace zrt::kernels {
namespace {

// -1: no override on this thread; otherwise the simple bits.
thread_local int t_override = -1;
thread_local bool t_planning_cuda = false;

constexpr const char* kSimpleKernelNames =
    "cross_entropy, layernorm, elementwise, attention, embedding_backward, gemm_epilogue or all";

unsigned bit_of(std::string_view name, const char* value) {
  if (name == "all") return ~0u;
  if (name == "cross_entropy") return unsigned(FastKernel::cross_entropy);
  if (name == "layernorm") return unsigned(FastKernel::layernorm);
  if (name == "elementwise") return unsigned(FastKernel::elementwise);
  if (name == "attention") return unsigned(FastKernel::attention);
  if (name == "embedding_backward") return unsigned(FastKernel::embedding_backward);
  if (name == "gemm_epilogue") return unsigned(FastKernel::gemm_epilogue);
  ZRT_THROW(InvalidArgument, "ZRT_SIMPLE_KERNELS='", value, "': '", name,
            "' is not a kernel; name kernels separated by commas: ", kSimpleKernelNames);
}

unsigned env_simple_bits() {
  static const unsigned bits = parse_simple_kernels(std::getenv("ZRT_SIMPLE_KERNELS"));
  return bits;
}

}  // namespace

unsigned parse_simple_kernels(const char* value) {
  if (!value) return 0;
  unsigned bits = 0;
  std::string_view rest(value);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) bits |= bit_of(name, value);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return bits;
}

bool simple_kernel(FastKernel k) {
  const unsigned bits = t_override >= 0 ? unsigned(t_override) : env_simple_bits();
  return (bits & unsigned(k)) != 0;
}

ScopedSimpleKernels::ScopedSimpleKernels(unsigned simple_bits) : previous_(t_override) {
  t_override = static_cast<int>(simple_bits & 0x7fffffffu);
}

ScopedSimpleKernels::~ScopedSimpleKernels() { t_override = previous_; }

bool planning_cuda_kernels() { return t_planning_cuda; }

ScopedCudaKernelPlan::ScopedCudaKernelPlan() : previous_(t_planning_cuda) {
  t_planning_cuda = true;
}

ScopedCudaKernelPlan::~ScopedCudaKernelPlan() { t_planning_cuda = previous_; }

}  // namespace zrt::kernels
