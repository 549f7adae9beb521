// Squared L2 norm against float64, the non-finite flag, and a result that
// does not depend on the thread count.
#include <boost/test/unit_test.hpp>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/ops/norm.h"

using namespace zrt;
using namespace zrt::test;

BOOST_AUTO_TEST_SUITE(kernels_norm)

BOOST_AUTO_TEST_CASE(squared_norm_matches_float64) {
  auto gen = fresh_generator();
  for (std::int64_t n : kSizes) {
    for (DType t : {DType::f32, DType::bf16, DType::f16}) {
      Tensor x = random_tensor(n, t, gen, -3, 3);
      double want = 0;
      for (double v : x.to_doubles()) want += v * v;
      const kernels::NormResult r = kernels::squared_norm(x);
      // f32 sums of 16 squares per lane, then a tree of depth 8: a relative
      // error below (16 + 8 + 1) units of roundoff.
      BOOST_TEST(std::fabs(r.squared_norm - want) <= 25 * 0x1p-24 * want,
                 dtype_name(t) << " n=" << n << ": " << r.squared_norm << " vs " << want);
      BOOST_TEST(!r.non_finite);
    }
  }
}

BOOST_AUTO_TEST_CASE(same_bits_for_any_thread_count) {
  auto gen = fresh_generator();
  Tensor x = random_tensor((1 << 20) + 7, DType::f32, gen);
  double one, two;
  {
    CpuThreadsGuard g(1);
    one = kernels::squared_norm(x).squared_norm;
  }
  {
    CpuThreadsGuard g(2);
    two = kernels::squared_norm(x).squared_norm;
  }
  BOOST_TEST(std::memcmp(&one, &two, sizeof one) == 0, one << " vs " << two);
}

BOOST_AUTO_TEST_CASE(non_finite_values_are_found) {
  auto gen = fresh_generator();
  for (std::int64_t n :
       {std::int64_t(1), std::int64_t(3), std::int64_t(4097), std::int64_t((1 << 20) + 7)}) {
    std::uniform_int_distribution<std::int64_t> pos(0, n - 1);
    for (double bad : {double(NAN), double(INFINITY), -double(INFINITY)}) {
      for (DType t : {DType::f32, DType::bf16, DType::f16}) {
        Tensor x = random_tensor(n, t, gen);
        x.set_item(pos(gen), bad);
        BOOST_TEST(kernels::has_non_finite(x), dtype_name(t) << " n=" << n << " with " << bad);
      }
    }
  }
  // Squares that overflow f32 make the norm infinite, but the values are finite.
  Tensor big = Tensor::full({5}, 1e30, DType::f32);
  const kernels::NormResult r = kernels::squared_norm(big);
  BOOST_TEST(std::isinf(r.squared_norm));
  BOOST_TEST(!r.non_finite);
  BOOST_CHECK_THROW(kernels::squared_norm(Tensor::empty({3}, DType::f64)), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
