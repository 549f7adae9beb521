// cast: round to nearest even against a float64 reference, special values,
// overflow, every 16-bit pattern decoded, the same bits as Tensor::copy_, and
// stochastic rounding.
#include <bit>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/ops/cast.h"

using namespace zrt;
using namespace zrt::test;
using kernels::cast;
using kernels::cast_stochastic;

namespace {

// Decodes a 16-bit pattern independently of zrt: sign, exponent, mantissa.
double decode16(std::uint16_t h, int exp_bits, int mant_bits) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int e = (h >> mant_bits) & ((1 << exp_bits) - 1);
  const int m = h & ((1 << mant_bits) - 1);
  const double sign = (h >> 15) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(double(m), 1 - bias - mant_bits);
  return sign * std::ldexp(double(m + (1 << mant_bits)), e - bias - mant_bits);
}

// f32 values covering every exponent, plus the special cases.
std::vector<float> interesting_floats(std::mt19937_64& gen, std::size_t random_count) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          -NAN,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          1e30f,
                          -1e38f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(),
                          5.960464477539063e-08f,
                          2.9802322387695312e-08f,
                          2.98023259e-08f,
                          8.940697e-08f};
  // Halfway cases for bf16: mantissa bits below the kept 7 exactly 0x8000,
  // with the kept part even and odd.
  for (std::uint32_t hi : {0x3f80u, 0x3f81u, 0x4000u, 0x4001u, 0xc123u, 0x7f7fu})
    v.push_back(std::bit_cast<float>((hi << 16) | 0x8000u));
  // Halfway cases for f16 (normal and subnormal).
  for (double h : {1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11),
                   3 * std::ldexp(1.0, -25), std::ldexp(1.0, -25), 5 * std::ldexp(1.0, -25)})
    v.push_back(static_cast<float>(h)), v.push_back(static_cast<float>(-h));
  for (std::uint64_t u = 0; u < (1ull << 32); u += 65521)
    v.push_back(std::bit_cast<float>(std::uint32_t(u)));
  std::uniform_int_distribution<std::uint32_t> bits;
  for (std::size_t i = 0; i < random_count; ++i) v.push_back(std::bit_cast<float>(bits(gen)));
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels_cast)

BOOST_AUTO_TEST_CASE(every_16bit_pattern_decodes_exactly) {
  for (auto [dtype, exp_bits, mant_bits] :
       {std::tuple{DType::bf16, 8, 7}, std::tuple{DType::f16, 5, 10}}) {
    Tensor src = odd_offset_view(65536, dtype);
    auto* p = static_cast<std::uint16_t*>(src.data_ptr());
    for (std::uint32_t h = 0; h < 65536; ++h) p[h] = static_cast<std::uint16_t>(h);
    Tensor dst = odd_offset_view(65536, DType::f32);
    poison(dst);
    cast(dst, src);
    const float* d = dst.data<float>();
    for (std::uint32_t h = 0; h < 65536; ++h) {
      const double want = decode16(static_cast<std::uint16_t>(h), exp_bits, mant_bits);
      if (!same_value(d[h], want))
        BOOST_FAIL(dtype_name(dtype) << " pattern 0x" << std::hex << h << " decoded to " << d[h]);
    }
  }
}

BOOST_AUTO_TEST_CASE(f32_to_16bit_rounds_to_nearest_even) {
  auto gen = fresh_generator();
  const std::vector<float> values = interesting_floats(gen, 200000);
  const auto n = static_cast<std::int64_t>(values.size());
  Tensor src = odd_offset_view(n, DType::f32);
  std::copy(values.begin(), values.end(), src.data<float>());
  for (DType t : {DType::bf16, DType::f16}) {
    Tensor dst = odd_offset_view(n, t);
    poison(dst);
    cast(dst, src);
    Tensor back = odd_offset_view(n, DType::f32);
    cast(back, dst);  // exact, checked by every_16bit_pattern_decodes_exactly
    const float* b = back.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      const double want = round_to(t, values[i]);
      if (!same_value(b[i], want))
        BOOST_FAIL(dtype_name(t) << ": " << values[i] << " (0x" << std::hex
                                 << std::bit_cast<std::uint32_t>(values[i]) << ") -> " << b[i]
                                 << ", want " << want);
    }
  }
}

BOOST_AUTO_TEST_CASE(between_16bit_formats_and_every_size) {
  auto gen = fresh_generator();
  for (std::int64_t n : kSizes) {
    for (DType from : {DType::f32, DType::bf16, DType::f16}) {
      for (DType to : {DType::f32, DType::bf16, DType::f16}) {
        Tensor src = random_tensor(n, from, gen, -70000, 70000);
        Tensor dst = odd_offset_view(n, to);
        poison(dst);
        cast(dst, src);
        const std::vector<double> s = src.to_doubles(), d = dst.to_doubles();
        for (std::int64_t i = 0; i < n; ++i)
          if (!same_value(d[i], round_to(to, s[i])))
            BOOST_FAIL(dtype_name(from) << "->" << dtype_name(to) << " n=" << n << " i=" << i
                                        << ": " << s[i] << " -> " << d[i]);
      }
    }
  }
}

// Tensor::copy_ (the runtime's host cast) and the cast kernel share one
// conversion (Note [16-bit storage types]): the same bits for every value, NaN
// payloads included. Only a signalling NaN widened to f32 differs: copy_
// passes it through double, which quiets it.
BOOST_AUTO_TEST_CASE(tensor_copy_converts_as_cast_bit_for_bit) {
  auto gen = fresh_generator();
  std::vector<float> values = interesting_floats(gen, 20000);
  for (std::uint32_t nan :
       {0x7fc00001u, 0xffa00000u, 0x7f800001u, 0xff812345u, 0x7fffffffu, 0xffc0e000u})
    values.push_back(std::bit_cast<float>(nan));
  const auto n = static_cast<std::int64_t>(values.size());
  Tensor src = Tensor::empty({n}, DType::f32);
  std::copy(values.begin(), values.end(), src.data<float>());
  for (DType t : {DType::bf16, DType::f16}) {
    Tensor by_cast = Tensor::empty({n}, t);
    cast(by_cast, src);
    const Tensor by_copy = src.to(t);
    BOOST_TEST(std::memcmp(by_cast.data_ptr(), by_copy.data_ptr(), by_copy.nbytes()) == 0,
               "f32 -> " << dtype_name(t));

    Tensor patterns = Tensor::empty({65536}, t);
    auto* p = static_cast<std::uint16_t*>(patterns.data_ptr());
    for (std::uint32_t h = 0; h < 65536; ++h) p[h] = static_cast<std::uint16_t>(h);
    const Tensor wide_cast = Tensor::empty({65536}, DType::f32);
    cast(wide_cast, patterns);
    const Tensor wide_copy = patterns.to(DType::f32);
    const float* a = wide_cast.data<float>();
    const float* b = wide_copy.data<float>();
    for (std::uint32_t h = 0; h < 65536; ++h)
      if (std::bit_cast<std::uint32_t>(a[h]) != std::bit_cast<std::uint32_t>(b[h]) &&
          !(std::isnan(a[h]) && std::isnan(b[h])))
        BOOST_FAIL(dtype_name(t) << " pattern 0x" << std::hex << h << ": cast " << a[h]
                                 << ", copy_ " << b[h]);
    for (DType to : {DType::bf16, DType::f16}) {
      Tensor narrow_cast = Tensor::empty({65536}, to);
      cast(narrow_cast, patterns);
      const Tensor narrow_copy = patterns.to(to);
      BOOST_TEST(
          std::memcmp(narrow_cast.data_ptr(), narrow_copy.data_ptr(), narrow_copy.nbytes()) == 0,
          dtype_name(t) << " -> " << dtype_name(to));
    }
  }
}

BOOST_AUTO_TEST_CASE(same_dtype_copies_any_dtype) {
  Tensor src = Tensor::from_doubles({1, -2, 3, 40000, -5}, DType::i64).slice(1, 3);
  Tensor dst = odd_offset_view(3, DType::i64);
  poison(dst);
  cast(dst, src);
  BOOST_TEST(dst.to_doubles() == std::vector<double>({-2, 3, 40000}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(f32_widens_to_f64_exactly_and_no_other_f64_pair_casts) {
  const std::vector<double> values{1.0 / 3, -0.0, 3.4e38, 1e-45, -7.25};
  Tensor src = Tensor::from_doubles(values, DType::f32);
  Tensor dst = Tensor::empty({5}, DType::f64);
  cast(dst, src);
  BOOST_TEST(dst.to_doubles() == src.to_doubles(), boost::test_tools::per_element());
  BOOST_TEST(std::signbit(dst.item(1)));
  BOOST_CHECK_THROW(cast(Tensor::empty({5}, DType::f32), dst),
                    InvalidArgument);  // narrowing: not a cast
  BOOST_CHECK_THROW(cast(Tensor::empty({5}, DType::f64), Tensor::empty({5}, DType::bf16)),
                    InvalidArgument);
}

BOOST_AUTO_TEST_CASE(bad_arguments_throw_typed_errors) {
  Tensor f = Tensor::empty({5}, DType::f32);
  BOOST_CHECK_THROW(cast(Tensor::empty({4}, DType::bf16), f), InvalidArgument);
  BOOST_CHECK_THROW(cast(Tensor::empty({5}, DType::i32), f), InvalidArgument);
  BOOST_CHECK_THROW(cast_stochastic(Tensor::empty({5}, DType::f16), f, 1), InvalidArgument);
  BOOST_CHECK_THROW(
      cast_stochastic(Tensor::empty({5}, DType::bf16), Tensor::empty({5}, DType::bf16), 1),
      InvalidArgument);
  Tensor freed = Tensor::empty({5}, DType::bf16);
  free_storage(freed);
  BOOST_CHECK_THROW(cast(freed, f), InvalidState);
  BOOST_CHECK_THROW(cast(f, freed), InvalidState);
}

BOOST_AUTO_TEST_CASE(stochastic_rounding_is_deterministic_and_picks_a_neighbour) {
  auto gen = fresh_generator();
  const std::uint64_t seed = gen();
  for (std::int64_t n : kSizes) {
    Tensor src = random_tensor(n, DType::f32, gen, -1000, 1000);
    if (n > 3) {
      float* s = src.data<float>();
      s[0] = NAN, s[1] = INFINITY, s[2] = -INFINITY, s[3] = 1.5f;  // 1.5 is exact in bf16
    }
    Tensor a = odd_offset_view(n, DType::bf16), b = odd_offset_view(n, DType::bf16);
    poison(a), poison(b);
    {
      CpuThreadsGuard one(1);
      cast_stochastic(a, src, seed);
    }
    {
      CpuThreadsGuard two(2);
      cast_stochastic(b, src, seed);
    }
    BOOST_TEST(bytes_of(a) == bytes_of(b), "n=" << n << ": same seed, different thread count");
    const float* s = src.data<float>();
    const auto* r = static_cast<const std::uint16_t*>(a.data_ptr());
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t x = std::bit_cast<std::uint32_t>(s[i]);
      if (std::isnan(s[i])) {
        BOOST_TEST(std::isnan(std::bit_cast<float>(std::uint32_t(r[i]) << 16)));
        continue;
      }
      const std::uint16_t down = static_cast<std::uint16_t>(x >> 16);  // truncation toward zero
      const bool exact = (x & 0xffffu) == 0;
      if (!(r[i] == down || (!exact && r[i] == down + 1)))
        BOOST_FAIL("n=" << n << " i=" << i << ": " << s[i] << " rounded to bf16 0x" << std::hex
                        << r[i]);
    }
  }
}

BOOST_AUTO_TEST_CASE(stochastic_rounding_is_unbiased_and_seeded) {
  auto gen = fresh_generator();
  const std::int64_t n = 1 << 20;
  const double spacing = std::ldexp(1.0, -7);  // bf16 spacing in [1, 2)
  for (double frac : {0.1, 0.3, 0.5, 0.77}) {
    const float x = static_cast<float>(1.0 + frac * spacing);
    Tensor src = Tensor::full({n}, x, DType::f32);
    Tensor dst = Tensor::empty({n}, DType::bf16);
    const std::uint64_t seed = gen();
    cast_stochastic(dst, src, seed);
    double sum = 0;
    for (double v : dst.to_doubles()) sum += v;
    const double p = double(x - 1.0) / spacing;
    const double standard_error = spacing * std::sqrt(p * (1 - p) / double(n));
    BOOST_TEST(std::fabs(sum / double(n) - double(x)) < 5 * standard_error,
               "mean " << sum / double(n) << " vs " << x);
    Tensor other = Tensor::empty({n}, DType::bf16);
    cast_stochastic(other, src, seed + 1);
    BOOST_TEST((bytes_of(other) != bytes_of(dst)), "another seed gave the same rounding");
  }
}

BOOST_AUTO_TEST_SUITE_END()
