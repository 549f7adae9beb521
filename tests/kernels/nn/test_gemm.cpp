// GEMM on the CPU against a float64 triple loop: every transpose pair, beta 0
// (output poisoned with NaN, never read) and 1 (accumulate), odd sizes
// (0, 1, 3, 2^k+7). f64 within 1e-12, f32 within 1e-5, bf16/f16 (fp32
// accumulate, one rounding of the output) within 1e-2, all relative to
// 1 + max |reference|.
#include <boost/test/unit_test.hpp>
#include <random>

#include "zrt/kernels/nn/gemm.h"

using namespace zrt;

namespace {

Tensor random_matrix(std::int64_t r, std::int64_t c, DType t, std::mt19937& gen) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(static_cast<std::size_t>(r * c));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, t, Device::cpu(), {r, c});
}

}  // namespace

BOOST_AUTO_TEST_CASE(gemm_matches_f64_loop_for_all_transposes_and_dtypes) {
  std::mt19937 gen(21);
  const std::int64_t sizes[][3] = {{3, 23, 5}, {1, 1, 1}, {0, 3, 4}, {4, 3, 0}, {39, 17, 71}};
  for (DType t : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    const double tol = t == DType::f64 ? 1e-12 : t == DType::f32 ? 1e-5 : 1e-2;
    for (auto [m, n, k] : sizes) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          for (double beta : {0.0, 1.0}) {
            Tensor a = random_matrix(ta ? k : m, ta ? m : k, t, gen);
            Tensor b = random_matrix(tb ? n : k, tb ? k : n, t, gen);
            Tensor c = beta == 0.0 ? Tensor::full({m, n}, NAN, t) : random_matrix(m, n, t, gen);
            const auto c0 = c.to_doubles(), av = a.to_doubles(), bv = b.to_doubles();
            const double alpha = 0.75;
            kernels::gemm(a, ta, b, tb, c, alpha, beta);
            std::vector<double> ref(static_cast<std::size_t>(m * n));
            double scale = 1;
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (std::int64_t p = 0; p < k; ++p)
                  s += av[ta ? p * m + i : i * k + p] * bv[tb ? j * k + p : p * n + j];
                ref[i * n + j] = alpha * s + beta * c0[i * n + j];
                scale = std::max(scale, 1 + std::abs(ref[i * n + j]));
              }
            const auto got = c.to_doubles();
            double err = 0;
            for (std::size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - ref[i]));
            BOOST_TEST(err <= tol * scale, dtype_name(t) << " m=" << m << " n=" << n << " k=" << k
                                                      << " ta=" << ta << " tb=" << tb << " beta=" << beta
                                                      << ": max err " << err);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(gemm_rejects_mismatched_operands) {
  Tensor a = Tensor::zeros({3, 4}, DType::f32), b = Tensor::zeros({5, 2}, DType::f32);
  Tensor c = Tensor::zeros({3, 2}, DType::f32);
  BOOST_CHECK_THROW(kernels::gemm(a, false, b, false, c), InvalidArgument);  // inner 4 vs 5
  BOOST_CHECK_THROW(kernels::gemm(a, false, Tensor::zeros({4, 2}, DType::bf16), false, c),
                    InvalidArgument);  // dtype
  BOOST_CHECK_THROW(kernels::gemm(a, false, Tensor::zeros({4, 3}, DType::f32), false, c),
                    InvalidArgument);  // output shape
  BOOST_CHECK_THROW(kernels::gemm(Tensor::zeros({3, 4}, DType::i32), false,
                                  Tensor::zeros({4, 2}, DType::i32), false,
                                  Tensor::zeros({3, 2}, DType::i32)),
                    InvalidArgument);
}
