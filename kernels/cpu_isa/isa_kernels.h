// The CPU kernels whose speed depends on the instruction set: GEMM, blocked
// causal attention and GELU, compiled once per x86-64 level and picked at run
// time by what the CPU supports (Note [Kernels per instruction set]).
//
// Note [Kernels per instruction set]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Eigen chooses its vector width when it is compiled, so a binary built for
// baseline x86-64 runs its GEMM on SSE2 at a fraction of an AVX2/FMA core's
// rate. isa_kernels_impl.h is therefore compiled three times (baseline, AVX2 +
// FMA, AVX-512), each copy in its own namespace with Eigen renamed (a macro)
// so that no template instance of one copy can be merged by the linker into
// another; isa_kernels() returns the table of the best copy the CPU runs.
// These files include nothing of zrt but this header and the ZRT_HD
// arithmetic they share with the CUDA kernels (gelu_math.h), and they own no
// threads: callers split the work (cpu_parallel.h) and pass the ranges.
// ZRT_CPU_ISA=baseline|avx2|avx512 in the environment caps the choice (for
// benchmarks and for testing every copy on one machine). The sanitizer builds
// (tools/sanitize.sh) make the baseline copy alone: one source, checked once.
#pragma once

#include <cstdint>

#include "zrt/kernels/attention_dims.h"

namespace zrt::kernels {

// c = alpha * op(a) · op(b) + beta * c, row-major with leading dimensions
// (elements between rows); op(a) is [m, k], op(b) [k, n], c [m, n]. beta = 0
// never reads c.
template <class T>
struct GemmCall {
  bool trans_a, trans_b;
  std::int64_t m, n, k;
  T alpha;
  const T* a;
  std::int64_t lda;
  const T* b;
  std::int64_t ldb;
  T beta;
  T* c;
  std::int64_t ldc;
};

// Causal attention over the (batch, head) pairs [pair_begin, pair_end), in the
// layout of attention_math.h; lse as there. The backward also needs out.
template <class T>
struct AttentionCall {
  AttentionDims dims;
  std::int64_t pair_begin, pair_end;
  const T* qkv;
  T* out;
  T* lse;
  const T* dout;  // backward only
  T* dqkv;        // backward only
};

template <class T>
struct IsaTable {
  void (*gemm)(const GemmCall<T>&);
  void (*attention_forward)(const AttentionCall<T>&);
  void (*attention_backward)(const AttentionCall<T>&);
  void (*gelu_forward)(const T* x, T* y, std::int64_t n);
  void (*gelu_backward)(const T* x, const T* dy, T* dx, std::int64_t n);
};

enum class CpuIsa : std::uint8_t { baseline, avx2, avx512 };

struct IsaKernels {
  CpuIsa isa;
  const char* name;
  IsaTable<float> f32;
  IsaTable<double> f64;
  template <class T>
  const IsaTable<T>& table() const {
    if constexpr (sizeof(T) == 4)
      return f32;
    else
      return f64;
  }
};

// The best copy this CPU runs (capped by ZRT_CPU_ISA), chosen on first use.
const IsaKernels& isa_kernels();
// The best copy at or below `cap` ("baseline", "avx2", "avx512"; null or
// empty: no cap); throws InvalidArgument for any other name.
const IsaKernels& isa_kernels_capped(const char* cap);
// A given copy, or null when the CPU (or the build) lacks it.
const IsaKernels* isa_kernels_for(CpuIsa isa);

// Query rows per block of the blocked attention: the block's scores [rows, T]
// stay in cache while the head's keys stream past.
inline constexpr std::int64_t kAttentionQueryBlock = 64;

}  // namespace zrt::kernels
