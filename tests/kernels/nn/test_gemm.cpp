// GEMM on the CPU against a float64 triple loop, through the default and
// every CPU GEMM backend this build has (Note [CPU GEMM backends]): every
// transpose pair, beta 0 (output poisoned with NaN, never read) and 1
// (accumulate), odd sizes (0, 1, 3, 2^k+7), rows split over 1 and 3 kernel
// threads. f64 within 1e-12, f32 within 1e-5, bf16/f16 (fp32 accumulate, one
// rounding of the output) within 1e-2, all relative to 1 + max |reference|.
// Concurrent calls from several threads give what one call alone gives.
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <random>
#include <thread>

#include "tests/kernels/kernel_test_util.h"
#include "tests/support/expect_throw.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/runtime/memory/address_space.h"

using namespace zrt;

namespace {

Tensor random_matrix(std::int64_t r, std::int64_t c, DType t, std::mt19937& gen) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(static_cast<std::size_t>(r * c));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, t, Device::cpu(), {r, c});
}

// Every backend this build has; null stands for kernels::gemm's own choice.
std::vector<const kernels::CpuGemmBackend*> backends() {
  std::vector<const kernels::CpuGemmBackend*> all{nullptr};
  for (auto which : {kernels::CpuGemm::eigen, kernels::CpuGemm::openblas})
    if (const auto* b = kernels::cpu_gemm_for(which)) all.push_back(b);
  return all;
}

void run_gemm(const kernels::CpuGemmBackend* backend, const Tensor& a, bool ta, const Tensor& b,
              bool tb, const Tensor& c, double alpha, double beta) {
  if (backend)
    kernels::gemm_with(*backend, a, ta, b, tb, c, alpha, beta);
  else
    kernels::gemm(a, ta, b, tb, c, alpha, beta);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gemm_matches_f64_loop_for_all_transposes_and_dtypes) {
  std::mt19937 gen(21);
  const std::int64_t sizes[][3] = {{3, 23, 5}, {1, 1, 1},    {0, 3, 4},
                                   {4, 3, 0},  {39, 17, 71}, {67, 45, 33}};
  for (const auto* backend : backends())
    for (int threads : {1, 3}) {
      kernels::set_cpu_threads(threads);
      const std::string via = backend ? backend->name : "default";
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
                run_gemm(backend, a, ta, b, tb, c, alpha, beta);
                const std::vector<double> ref = zrt::test::reference_gemm(
                    m, n, k, av, ta ? m : k, ta, bv, tb ? k : n, tb, c0, n, alpha, beta);
                double scale = 1;
                for (const double r : ref) scale = std::max(scale, 1 + std::abs(r));
                const auto got = c.to_doubles();
                double err = 0;
                for (std::size_t i = 0; i < got.size(); ++i)
                  err = std::max(err, std::abs(got[i] - ref[i]));
                BOOST_TEST(err <= tol * scale, via << " threads=" << threads << " " << dtype_name(t)
                                                   << " m=" << m << " n=" << n << " k=" << k
                                                   << " ta=" << ta << " tb=" << tb
                                                   << " beta=" << beta << ": max err " << err);
              }
            }
          }
        }
      }
    }
  kernels::set_cpu_threads(0);
}

BOOST_AUTO_TEST_CASE(concurrent_calls_match_one_call) {
  // Ranks that are threads call the backend at once (and each splits its rows
  // over its own workers); a library with shared unlocked buffers fails here.
  std::mt19937 gen(5);
  // Many calls give a race many chances; under AddressSanitizer, which
  // checks each call's memory but no interleaving, a tenth of them.
#ifdef __SANITIZE_ADDRESS__
  constexpr int kThreads = 4, kReps = 250;
#else
  constexpr int kThreads = 4, kReps = 2500;
#endif
  for (const auto* backend : backends()) {
    std::vector<Tensor> a, b, expected;
    for (int t = 0; t < kThreads; ++t) {
      a.push_back(random_matrix(37, 300, DType::f32, gen));
      b.push_back(random_matrix(129, 300, DType::f32, gen));
      expected.push_back(Tensor::empty({37, 129}, DType::f32));
      run_gemm(backend, a[t], false, b[t], true, expected[t], 1.0, 0.0);
    }
    std::vector<int> mismatches(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        Tensor c = Tensor::empty({37, 129}, DType::f32);
        for (int rep = 0; rep < kReps; ++rep) {
          run_gemm(backend, a[t], false, b[t], true, c, 1.0, 0.0);
          mismatches[t] += std::memcmp(c.data_ptr(), expected[t].data_ptr(), c.nbytes()) != 0;
        }
      });
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t)
      BOOST_TEST(mismatches[t] == 0, (backend ? backend->name : "default")
                                         << " thread " << t << ": " << mismatches[t] << " of "
                                         << kReps << " calls differ");
  }
}

BOOST_AUTO_TEST_CASE(openblas_is_loaded_where_built) {
  const auto* openblas = kernels::cpu_gemm_for(kernels::CpuGemm::openblas);
  if (ZRT_TEST_OPENBLAS_BUILT && !address_space_limit()) {
    BOOST_TEST(openblas != nullptr);
    try {
      kernels::cpu_gemm_named("openblas");
    } catch (const std::exception& e) {
      BOOST_TEST_MESSAGE(e.what());  // the reason it was not loaded
    }
  }
  if (!ZRT_TEST_OPENBLAS_BUILT) BOOST_TEST(openblas == nullptr);
}

BOOST_AUTO_TEST_CASE(backends_are_named) {
  BOOST_TEST(std::string(kernels::cpu_gemm_named("eigen").name) == "eigen");
  BOOST_TEST(&kernels::cpu_gemm_named("") == &kernels::cpu_gemm_named(nullptr));
  BOOST_CHECK_THROW(kernels::cpu_gemm_named("mkl"), InvalidArgument);
  if (const auto* openblas = kernels::cpu_gemm_for(kernels::CpuGemm::openblas)) {
    BOOST_TEST(&kernels::cpu_gemm_named("openblas") == openblas);
    BOOST_TEST(&kernels::cpu_gemm_named("") == openblas);  // the default where available
  } else {
    BOOST_CHECK_THROW(kernels::cpu_gemm_named("openblas"), InvalidArgument);
  }
  BOOST_CHECK_THROW(
      kernels::gemm_with(kernels::cpu_gemm_named("eigen"), Tensor::zeros({3, 4}, DType::f32), false,
                         Tensor::zeros({5, 2}, DType::f32), false,
                         Tensor::zeros({3, 2}, DType::f32)),
      InvalidArgument);  // inner 4 vs 5, as through gemm
}

BOOST_AUTO_TEST_CASE(gemm_rejects_mismatched_operands) {
  Tensor a = Tensor::zeros({3, 4}, DType::f32), b = Tensor::zeros({5, 2}, DType::f32);
  Tensor c = Tensor::zeros({3, 2}, DType::f32);
  BOOST_CHECK_THROW(kernels::gemm(a, false, b, false, c), InvalidArgument);  // inner 4 vs 5
  BOOST_CHECK_THROW(kernels::gemm(a, false, Tensor::zeros({4, 2}, DType::bf16), false, c),
                    InvalidArgument);  // dtype
  BOOST_CHECK_THROW(kernels::gemm(a, false, Tensor::zeros({4, 3}, DType::f32), false, c),
                    InvalidArgument);  // output shape
  BOOST_CHECK_THROW(
      kernels::gemm(Tensor::zeros({3, 4}, DType::i32), false, Tensor::zeros({4, 2}, DType::i32),
                    false, Tensor::zeros({3, 2}, DType::i32)),
      InvalidArgument);
}

// An output that is (part of) an operand would be written while it is read:
// with beta = 0 the output is cleared first, and a @ I gave zeros.
BOOST_AUTO_TEST_CASE(gemm_rejects_an_output_overlapping_an_operand) {
  Tensor a = Tensor::from_doubles({1, 2, 3, 4}, DType::f32, Device::cpu(), {2, 2});
  const Tensor eye = Tensor::from_doubles({1, 0, 0, 1}, DType::f32, Device::cpu(), {2, 2});
  test::expect_throw<InvalidArgument>([&] { kernels::gemm(a, false, eye, false, a); },
                                      "overlaps operand a");
  Tensor both = Tensor::zeros({7}, DType::f32);  // b's last element is c's first
  test::expect_throw<InvalidArgument>(
      [&] {
        kernels::gemm(eye, false, both.slice(0, 4).view({2, 2}), false,
                      both.slice(3, 4).view({2, 2}));
      },
      "overlaps operand b");
  BOOST_TEST(a.to_doubles() == (std::vector<double>{1, 2, 3, 4}));  // nothing written
  Tensor apart = Tensor::zeros({8}, DType::f32);  // adjacent, not overlapping: fine
  kernels::gemm(eye, false, apart.slice(0, 4).view({2, 2}), false, apart.slice(4, 4).view({2, 2}));
}
