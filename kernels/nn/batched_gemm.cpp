#include "zrt/kernels/nn/batched_gemm.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "zrt/kernels/cpu_blas/cpu_gemm.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/element.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/batched_gemm.cuh"
#endif

namespace zrt::kernels {
namespace {

constexpr const char* kOp = "batched_gemm";

// One stored operand's matrix extent: `rows` rows of `cols` elements.
struct Extent {
  std::int64_t rows, cols;
};

// The element one past the last that any matrix of `o` touches.
std::int64_t operand_end(const BatchedGemm& g, const BatchedOperand& o, Extent e) {
  return (g.outer - 1) * o.outer + (g.inner - 1) * o.inner + (e.rows - 1) * o.ld + e.cols;
}

void check_operand(const char* name, const Tensor& t, const BatchedGemm& g, const BatchedOperand& o,
                   Extent e) {
  ZRT_CHECK_ARG(o.ld >= e.cols && o.outer >= 0 && o.inner >= 0, kOp, ": operand ", name,
                " has leading dim ", o.ld, " below its ", e.cols, " columns, or a negative stride");
  const std::int64_t end = operand_end(g, o, e);
  ZRT_CHECK_ARG(end <= t.numel(), kOp, ": operand ", name, "'s matrices reach element ", end,
                " of ", t.str(), ", which has ", t.numel());
}

// c's matrices are disjoint: the inner ones side by side within rows or one
// after another, and the outer groups one after another.
void check_output_disjoint(const BatchedGemm& g, Extent e) {
  const BatchedOperand& c = g.c;
  const std::int64_t span = (e.rows - 1) * c.ld + e.cols;
  const bool inner_ok = g.inner == 1 || c.inner >= span ||
                        (c.inner >= e.cols && (g.inner - 1) * c.inner + e.cols <= c.ld);
  const std::int64_t group_span = (g.inner - 1) * c.inner + span;
  const bool outer_ok = g.outer == 1 || c.outer >= group_span;
  ZRT_CHECK_ARG(inner_ok && outer_ok, kOp, ": output matrices overlap (ld ", c.ld, ", strides ",
                c.outer, " and ", c.inner, " for ", g.outer, " x ", g.inner, " matrices of ",
                e.rows, " x ", e.cols, ")");
}

// Stored matrix `src` (e.rows × e.cols, leading dim ld) widened into a
// packed buffer.
template <class A, class T>
void widen_matrix(const T* src, std::int64_t ld, Extent e, std::vector<A>& out) {
  out.resize(static_cast<std::size_t>(e.rows * e.cols));
  for (std::int64_t r = 0; r < e.rows; ++r)
    for (std::int64_t i = 0; i < e.cols; ++i)
      out[std::size_t(r * e.cols + i)] = load<A>(src[r * ld + i]);
}

// The CPU twin: the batch's matrices split over threads, each one call of
// the CPU GEMM backend (Note [CPU GEMM backends]); 16-bit operands are
// widened per matrix and a 16-bit c rounded once at the end.
template <class T, class C>
void batched_gemm_cpu(const BatchedGemm& g, Extent ea, Extent eb, const T* a, const T* b, C* c) {
  using A = acc_t<T>;
  static_assert(std::is_same_v<C, T> || std::is_same_v<C, A>);
  const auto gemm_rows = cpu_gemm().function<A>();
  const std::int64_t items = g.outer * g.inner;
  const std::int64_t cost = std::max<std::int64_t>(g.m * g.n * std::max<std::int64_t>(g.k, 1), 1);
  parallel_for(items * cost, cost, [&](std::int64_t lo, std::int64_t hi) {
    std::vector<A> a_wide, b_wide, c_wide;
    for (std::int64_t item = lo / cost; item < hi / cost; ++item) {
      const std::int64_t i = item / g.inner, j = item % g.inner;
      const T* pa = a + i * g.a.outer + j * g.a.inner;
      const T* pb = b + i * g.b.outer + j * g.b.inner;
      C* pc = c + i * g.c.outer + j * g.c.inner;
      GemmCall<A> call{g.trans_a, g.trans_b, g.m,    g.n,       g.k,     A(g.alpha), nullptr,
                       g.a.ld,    nullptr,   g.b.ld, A(g.beta), nullptr, g.c.ld};
      if constexpr (std::is_same_v<T, A>) {
        call.a = pa;
        call.b = pb;
      } else if (g.k > 0) {
        widen_matrix(pa, g.a.ld, ea, a_wide);
        widen_matrix(pb, g.b.ld, eb, b_wide);
        call.a = a_wide.data(), call.lda = ea.cols;
        call.b = b_wide.data(), call.ldb = eb.cols;
      }
      if constexpr (std::is_same_v<C, A>) {
        call.c = pc;
        gemm_rows(call);
      } else {
        if (g.beta != 0.0) {
          widen_matrix(pc, g.c.ld, {g.m, g.n}, c_wide);
        } else {
          c_wide.assign(static_cast<std::size_t>(g.m * g.n), A(0));
        }
        call.c = c_wide.data(), call.ldc = g.n;
        gemm_rows(call);
        for (std::int64_t r = 0; r < g.m; ++r)
          for (std::int64_t x = 0; x < g.n; ++x)
            pc[r * g.c.ld + x] = store<C>(c_wide[std::size_t(r * g.n + x)]);
      }
    }
  });
}

}  // namespace

void batched_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const BatchedGemm& g,
                  Stream stream) {
  check_nn_floats(kOp, {a, b});
  const DType t = a.dtype();
  ZRT_CHECK_ARG(c.dtype() == t || c.dtype() == acc_dtype(t), kOp, ": output ", c.str(), " must be ",
                dtype_name(t), " or ", dtype_name(acc_dtype(t)));
  ZRT_CHECK_ARG(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.outer >= 0 && g.inner >= 0, kOp,
                ": negative size (m ", g.m, ", n ", g.n, ", k ", g.k, ", batch ", g.outer, " x ",
                g.inner, ")");
  if (g.m == 0 || g.n == 0 || g.outer == 0 || g.inner == 0) return;
  const Extent ea = g.trans_a ? Extent{g.k, g.m} : Extent{g.m, g.k};
  const Extent eb = g.trans_b ? Extent{g.n, g.k} : Extent{g.k, g.n};
  const Extent ec{g.m, g.n};
  if (g.k > 0) {
    check_operand("a", a, g, g.a, ea);
    check_operand("b", b, g, g.b, eb);
    check_apart(kOp, c, "operand a", a);
    check_apart(kOp, c, "operand b", b);
    check_operands(kOp, {a, b, c}, stream);
  } else {
    check_operands(kOp, {c}, stream);
  }
  check_operand("c", c, g, g.c, ec);
  check_output_disjoint(g, ec);
  ZRT_CUDA_LAUNCH_AND_RETURN(
      kOp, c.device(),
      cuda::launch_batched_gemm(t, c.dtype(), g, g.k ? a.data_ptr() : nullptr,
                                g.k ? b.data_ptr() : nullptr, c.data_ptr(), c.device().index,
                                tf32_gemms(), cuda_stream(stream)));
  run_cpu_twin(
      stream, kOp,
      [=](const Tensor& a, const Tensor& b, const Tensor& c) {
        dispatch<NnFloats>(t, kOp, [&](auto tag) {
          using T = typename decltype(tag)::type;
          using A = acc_t<T>;
          const T* pa = g.k ? a.data<T>() : nullptr;
          const T* pb = g.k ? b.data<T>() : nullptr;
          if (c.dtype() == t) {
            batched_gemm_cpu<T, T>(g, ea, eb, pa, pb, c.data<T>());
          } else if constexpr (!std::is_same_v<T, A>) {
            batched_gemm_cpu<T, A>(g, ea, eb, pa, pb, c.data<A>());
          }
        });
      },
      a, b, c);
}

}  // namespace zrt::kernels
