#include "zrt/kernels/nn/gemm.h"

#include <Eigen/Core>

#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/launch.h"
#include "zrt/kernels/nn/element.h"
#include "zrt/kernels/nn/nn_checks.h"

#ifdef ZRT_WITH_CUDA
#include "zrt/kernels/nn/gemm.cuh"
#endif

namespace zrt::kernels {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMat<T>>;

// The CPU twin. Rows of c are split over threads (Eigen's own GEMM runs
// single-threaded here); bf16/f16 operands are widened to fp32 first.
template <class T>
void gemm_cpu(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
              double alpha, const T* a, const T* b, double beta, T* c) {
  using A = acc_t<T>;
  ConstMap<T> a_stored(a, trans_a ? k : m, trans_a ? m : k);
  ConstMap<T> b_stored(b, trans_b ? n : k, trans_b ? k : n);
  Eigen::Map<RowMat<T>> c_map(c, m, n);
  // Widened copies for 16-bit types; plain maps for f32/f64.
  RowMat<A> a_wide, b_wide;
  auto run = [&](const auto& a_mat, const auto& b_mat) {
    parallel_for(m * n, n, [&](std::int64_t begin, std::int64_t end) {
      const std::int64_t r0 = begin / n, rows = (end - begin) / n;
      auto c_rows = c_map.middleRows(r0, rows);
      // dst = alpha * lhs · op(b) + beta * dst, Eigen folding alpha into its GEMM.
      auto mult = [&](const auto& lhs, auto&& dst) {
        if (beta == 0.0) dst.setZero();
        else if (beta != 1.0) dst *= A(beta);
        if (k == 0) return;
        if (trans_b) dst.noalias() += A(alpha) * lhs * b_mat.transpose();
        else dst.noalias() += A(alpha) * lhs * b_mat;
      };
      auto mult_rows = [&](auto&& dst) {
        if (trans_a) mult(a_mat.transpose().middleRows(r0, rows), dst);
        else mult(a_mat.middleRows(r0, rows), dst);
      };
      if constexpr (std::is_same_v<T, A>) {
        mult_rows(c_rows);
      } else {
        RowMat<A> acc = beta == 0.0 ? RowMat<A>::Zero(rows, n) : RowMat<A>(c_rows.template cast<A>());
        mult_rows(acc);
        c_rows = acc.template cast<T>();
      }
    });
  };
  if constexpr (std::is_same_v<T, A>) {
    run(a_stored, b_stored);
  } else {
    a_wide = a_stored.template cast<A>();
    b_wide = b_stored.template cast<A>();
    run(a_wide, b_wide);
  }
}

}  // namespace

void gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          double alpha, double beta, Stream stream) {
  constexpr const char* op = "gemm";
  check_nn_floats(op, {a, b, c});
  for (const Tensor* t : {&a, &b, &c})
    ZRT_CHECK_ARG(t->dim() >= 1, op, ": ", t->str(), " must have at least one dim");
  const std::int64_t m = trans_a ? a.size(-1) : matrix_rows(a);
  const std::int64_t k = trans_a ? matrix_rows(a) : a.size(-1);
  const std::int64_t kb = trans_b ? b.size(-1) : matrix_rows(b);
  const std::int64_t n = trans_b ? matrix_rows(b) : b.size(-1);
  ZRT_CHECK_ARG(k == kb, op, ": inner dims differ: op(", a.str(), ") is [", m, ", ", k,
                "], op(", b.str(), ") is [", kb, ", ", n, "]");
  ZRT_CHECK_ARG(c.size(-1) == n && matrix_rows(c) == m, op, ": output ", c.str(), " must be [",
                m, ", ", n, "]");
  if (m == 0 || n == 0) return;
  if (k == 0) {
    check_operands(op, {c}, stream);
  } else {
    check_operands(op, {a, b, c}, stream);
  }
  ZRT_CUDA_LAUNCH_AND_RETURN(op, c.device(),
      cuda::launch_gemm(a.dtype(), trans_a, trans_b, m, n, k, alpha, k ? a.data_ptr() : nullptr,
                        k ? b.data_ptr() : nullptr, beta, c.data_ptr(), c.device().index,
                        cuda_stream(stream)));
  dispatch<NnFloats>(a.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemm_cpu<T>(trans_a, trans_b, m, n, k, alpha, k ? a.data<T>() : nullptr,
                k ? b.data<T>() : nullptr, beta, c.data<T>());
  });
}

}  // namespace zrt::kernels
