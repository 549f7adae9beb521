// Helpers shared by the kernel tests: fresh random inputs (seed printed on
// failure), views at odd element offsets, poisoned outputs and reference
// rounding computed in float64.
#pragma once

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/support/test_seed.h"
#include "zrt/runtime/tensor.h"

namespace zrt::test {

inline constexpr std::int64_t kSizes[] = {0, 1, 3, 4097, (1 << 20) + 7};

// A generator seeded freshly each run (or from ZRT_TEST_SEED); the seed is
// printed with the test case's name, so a failure can be replayed.
inline std::mt19937_64 fresh_generator() {
  const auto& test = boost::unit_test::framework::current_test_case();
  return std::mt19937_64(test_seed(test.full_name().c_str()));
}

// A view of `n` elements starting at an odd element offset of a larger
// storage, so kernels see unaligned pointers.
inline Tensor odd_offset_view(std::int64_t n, DType dtype, std::int64_t offset = 3) {
  return Tensor::empty({n + offset + 2}, dtype).slice(offset, n);
}

// Uniform values in [lo, hi), stored in a view at an odd offset.
inline Tensor random_tensor(std::int64_t n, DType dtype, std::mt19937_64& gen, double lo = -2.0,
                            double hi = 2.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (auto& v : values) v = dist(gen);
  Tensor t = odd_offset_view(n, dtype);
  t.copy_(Tensor::from_doubles(values, dtype));
  return t;
}

// Fills every byte of `t` with 0xff: NaN for floats, -1 for integers.
inline void poison(const Tensor& t) { std::memset(t.data_ptr(), 0xff, t.nbytes()); }

// x rounded to nearest even into a binary format with `mantissa_bits`
// explicit bits, smallest normal exponent `min_exp` and largest finite value
// `max_finite`; overflow gives Inf. Computed in float64, independent of zrt.
inline double round_to_format(double x, int mantissa_bits, int min_exp, double max_finite) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const int e = std::max(std::ilogb(x), min_exp);
  const double quantum = std::ldexp(1.0, e - mantissa_bits);
  const double r = std::nearbyint(x / quantum) * quantum;
  if (std::fabs(r) > max_finite) return std::copysign(INFINITY, x);
  return r == 0 ? std::copysign(0.0, x) : r;
}
inline double round_to_bf16(double x) {
  return round_to_format(x, 7, -126, std::ldexp(255.0, 127 - 7));
}
inline double round_to_f16(double x) { return round_to_format(x, 10, -14, 65504.0); }
inline double round_to(DType t, double x) {
  if (t == DType::bf16) return round_to_bf16(x);
  if (t == DType::f16) return round_to_f16(x);
  return static_cast<double>(static_cast<float>(x));
}

// Same value, or both NaN; zeros must agree in sign.
inline bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// Sets ZRT_CPU_THREADS for the lifetime of the guard (restoring the old value).
class CpuThreadsGuard {
 public:
  explicit CpuThreadsGuard(int threads) {
    if (const char* old = std::getenv("ZRT_CPU_THREADS")) old_ = old, had_ = true;
    setenv("ZRT_CPU_THREADS", std::to_string(threads).c_str(), 1);
  }
  ~CpuThreadsGuard() {
    if (had_)
      setenv("ZRT_CPU_THREADS", old_.c_str(), 1);
    else
      unsetenv("ZRT_CPU_THREADS");
  }

 private:
  std::string old_;
  bool had_ = false;
};

// Raw bytes of a tensor (for bit-exact comparisons).
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
  const auto* p = static_cast<const unsigned char*>(host.data_ptr());
  return std::vector<unsigned char>(p, p + host.nbytes());
}

// max |ref - got| <= tol · (1 + max |ref|), a NaN failing: the worst error
// against the reference's scale, `what` naming the compared pair.
inline void check_close(const std::string& what, const std::vector<double>& ref,
                        const std::vector<double>& got, double tol) {
  BOOST_REQUIRE_EQUAL(ref.size(), got.size());
  double err = 0, scale = 1;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = std::abs(ref[i] - got[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
    scale = std::max(scale, 1 + std::abs(ref[i]));
  }
  BOOST_TEST(err <= tol * scale, what << ": max |difference| " << err << ", scale " << scale);
}

// alpha·op(A)·op(B) + beta·C0 in float64 over row-major operands with leading
// dimensions lda, ldb and ldc (op: the transpose when ta / tb); the columns
// of C0 past n are kept.
inline std::vector<double> reference_gemm(std::int64_t m, std::int64_t n, std::int64_t k,
                                          const std::vector<double>& a, std::int64_t lda, bool ta,
                                          const std::vector<double>& b, std::int64_t ldb, bool tb,
                                          const std::vector<double>& c0, std::int64_t ldc,
                                          double alpha, double beta) {
  std::vector<double> c = c0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += a[ta ? p * lda + i : i * lda + p] * b[tb ? j * ldb + p : p * ldb + j];
      c[i * ldc + j] = alpha * s + beta * c0[i * ldc + j];
    }
  return c;
}

}  // namespace zrt::test
