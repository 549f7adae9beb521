#include "zrt/kernels/nn/gemm.h"

#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/cpu_widen.h"
#include "zrt/kernels/nn/element.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/gemm.cuh"
#endif

namespace zrt::kernels {
namespace {

// -1: no ScopedTf32Gemms on this thread; otherwise 0 or 1.
thread_local int t_tf32_override = -1;

// The CPU twin: rows of c split over threads, each range one call of the
// CPU GEMM backend (Note [CPU GEMM backends]); bf16/f16 operands are widened
// to fp32 first and c is rounded once at the end.
template <class T>
void gemm_cpu(const CpuGemmBackend& backend, bool trans_a, bool trans_b, std::int64_t m,
              std::int64_t n, std::int64_t k, double alpha, const T* a, const T* b, double beta,
              T* c) {
  using A = acc_t<T>;
  const auto cpu_gemm_rows = backend.function<A>();
  std::vector<A> a_wide, b_wide, c_wide;
  const A* pa = reinterpret_cast<const A*>(a);
  const A* pb = reinterpret_cast<const A*>(b);
  A* pc = reinterpret_cast<A*>(c);
  if constexpr (!std::is_same_v<T, A>) {
    if (k) {
      a_wide = widened<A>(a, m * k);
      b_wide = widened<A>(b, k * n);
    }
    c_wide = beta == 0.0 ? std::vector<A>(static_cast<std::size_t>(m * n)) : widened<A>(c, m * n);
    pa = a_wide.data(), pb = b_wide.data(), pc = c_wide.data();
  }
  const std::int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  // Row blocks of 8 keep each thread's panels whole for the GEMM kernels.
  parallel_for(m * n, 8 * n, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t r0 = begin / n, rows = (end - begin) / n;
    cpu_gemm_rows({trans_a, trans_b, rows, n, k, A(alpha),
                   k ? pa + (trans_a ? r0 : r0 * lda) : nullptr, lda, pb, ldb, A(beta), pc + r0 * n,
                   n});
  });
  if constexpr (!std::is_same_v<T, A>) store_all(pc, c, m * n);
}

// backend: null for cpu_gemm().
void gemm_on(const CpuGemmBackend* backend, const Tensor& a, bool trans_a, const Tensor& b,
             bool trans_b, const Tensor& c, double alpha, double beta, Stream stream) {
  constexpr const char* op = "gemm";
  check_nn_floats(op, {a, b, c});
  for (const Tensor* t : {&a, &b, &c})
    ZRT_CHECK_ARG(t->dim() >= 1, op, ": ", t->str(), " must have at least one dim");
  const std::int64_t m = trans_a ? a.size(-1) : matrix_rows(a);
  const std::int64_t k = trans_a ? matrix_rows(a) : a.size(-1);
  const std::int64_t kb = trans_b ? b.size(-1) : matrix_rows(b);
  const std::int64_t n = trans_b ? matrix_rows(b) : b.size(-1);
  ZRT_CHECK_ARG(k == kb, op, ": inner dims differ: op(", a.str(), ") is [", m, ", ", k, "], op(",
                b.str(), ") is [", kb, ", ", n, "]");
  ZRT_CHECK_ARG(c.size(-1) == n && matrix_rows(c) == m, op, ": output ", c.str(), " must be [", m,
                ", ", n, "]");
  if (m == 0 || n == 0) return;
  if (k == 0) {
    check_operands(op, {c}, stream);
  } else {
    check_apart(op, c, "operand a", a);
    check_apart(op, c, "operand b", b);
    check_operands(op, {a, b, c}, stream);
  }
  ZRT_CUDA_LAUNCH_AND_RETURN(
      op, c.device(),
      cuda::launch_gemm(a.dtype(), trans_a, trans_b, m, n, k, alpha, k ? a.data_ptr() : nullptr,
                        k ? b.data_ptr() : nullptr, beta, c.data_ptr(), c.device().index,
                        tf32_gemms(), cuda_stream(stream)));
  run_cpu_twin(
      stream, op,
      [=](const Tensor& a, const Tensor& b, const Tensor& c) {
        dispatch<NnFloats>(a.dtype(), op, [&](auto tag) {
          using T = typename decltype(tag)::type;
          gemm_cpu<T>(backend ? *backend : cpu_gemm(), trans_a, trans_b, m, n, k, alpha,
                      k ? a.data<T>() : nullptr, k ? b.data<T>() : nullptr, beta, c.data<T>());
        });
      },
      a, b, c);
}

}  // namespace

bool parse_tf32(const char* value) {
  if (!value) return false;
  std::string_view v(value);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  std::string lower(v);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "1" || lower == "true" || lower == "on") return true;
  if (lower.empty() || lower == "0" || lower == "false" || lower == "off") return false;
  ZRT_THROW(InvalidArgument, "ZRT_TF32='", value,
            "' is not one of 0, 1 (also false, true, off, on): set 1 to let fp32 CUDA GEMMs "
            "round their inputs to TF32");
}

bool tf32_gemms() {
  if (t_tf32_override >= 0) return t_tf32_override == 1;
  static const bool env = parse_tf32(std::getenv("ZRT_TF32"));
  return env;
}

ScopedTf32Gemms::ScopedTf32Gemms(bool on) : previous_(t_tf32_override) {
  t_tf32_override = on ? 1 : 0;
}

ScopedTf32Gemms::~ScopedTf32Gemms() { t_tf32_override = previous_; }

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          double alpha, double beta, Stream stream) {
  gemm_on(nullptr, a, trans_a, b, trans_b, c, alpha, beta, stream);
}

void gemm_with(const CpuGemmBackend& backend, const Tensor& a, bool trans_a, const Tensor& b,
               bool trans_b, const Tensor& c, double alpha, double beta) {
  ZRT_CHECK_ARG(c.device().is_cpu(), "gemm_with: ", c.str(), " is not on the cpu");
  gemm_on(&backend, a, trans_a, b, trans_b, c, alpha, beta, Stream{});
}

}  // namespace zrt::kernels
