// Blockwise int8 and int4 quantization (Note [Blockwise int8 quantization],
// Note [Blockwise int4 quantization]) against a float64 oracle: the stored
// scale is max|x| / 127 (int4: / 7) of each block, every element dequantizes
// within half a scale of its value, padding holds zeros, a block of zeros
// stays zeros and a non-finite element turns its block (and only it) into
// NaN; int4 packs two values a byte, low nibble first, each chunk on its
// own. The CUDA kernels are checked against these twins bit for bit through
// the op registry.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/ops/quantize.h"
#include "zrt/kernels/ops/quantize_math.h"
#include "zrt/runtime/error.h"

using namespace zrt;
using namespace zrt::test;
using kernels::QuantFormat;

namespace {

const QuantFormat kFormats[] = {QuantFormat::int8, QuantFormat::int4};

double max_value(QuantFormat f) { return f == QuantFormat::int8 ? 127 : 7; }
// Elements a block: 256 (int8) or kInt4Block (int4).
std::int64_t block_of(QuantFormat f) { return f == QuantFormat::int8 ? 256 : kernels::kInt4Block; }
std::int64_t blocks_of(std::int64_t chunk, QuantFormat f) {
  return (chunk + block_of(f) - 1) / block_of(f);
}

std::int64_t chunk_bytes(std::int64_t chunk, QuantFormat f) {
  return kernels::quantized_bytes(chunk, chunk, f);
}

struct Quantized {
  Tensor bytes, values;  // the quantized chunks, and their dequantized values (f32)
};

Quantized round_trip(const Tensor& x, std::int64_t chunk, QuantFormat f, DType out = DType::f32) {
  Quantized q;
  q.bytes = Tensor::empty({kernels::quantized_bytes(x.numel(), chunk, f)}, DType::u8);
  poison(q.bytes);
  kernels::quantize(q.bytes, x, chunk, f);
  q.values = Tensor::empty({x.numel()}, out);
  poison(q.values);
  kernels::dequantize(q.values, q.bytes, chunk, f);
  return q;
}

float scale_at(const Tensor& bytes, std::int64_t chunk, std::int64_t c, std::int64_t b,
               QuantFormat f) {
  const auto* p =
      static_cast<const std::uint8_t*>(bytes.data_ptr()) + c * chunk_bytes(chunk, f) + 4 * b;
  float s;
  std::memcpy(&s, p, 4);
  return s;
}

// Value j of chunk c: an int8, or nibble j % 2 (low first) of byte j / 2.
int value_at(const Tensor& bytes, std::int64_t chunk, std::int64_t c, std::int64_t j,
             QuantFormat f) {
  const auto* p = static_cast<const std::uint8_t*>(bytes.data_ptr()) + c * chunk_bytes(chunk, f) +
                  4 * blocks_of(chunk, f);
  if (f == QuantFormat::int8) return static_cast<std::int8_t>(p[j]);
  const int nibble = j % 2 ? p[j / 2] >> 4 : p[j / 2] & 15;
  return nibble >= 8 ? nibble - 16 : nibble;
}

// Every element within half a scale (plus the rounding of x / s and of the
// output dtype) of its value; the scale is max|x| / 127 (int4: / 7) of its block.
void check_bound(const Tensor& x, const Quantized& q, std::int64_t chunk, QuantFormat f,
                 double out_eps) {
  const std::vector<double> v = x.to_doubles(), dq = q.values.to_doubles();
  const std::int64_t chunks = x.numel() / chunk, blocks = blocks_of(chunk, f), B = block_of(f);
  for (std::int64_t c = 0; c < chunks; ++c) {
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t first = c * chunk + b * B;
      const std::int64_t end = std::min(first + B, (c + 1) * chunk);
      double amax = 0;
      for (std::int64_t i = first; i < end; ++i) amax = std::max(amax, std::fabs(v[i]));
      const double s = scale_at(q.bytes, chunk, c, b, f), m = max_value(f);
      BOOST_REQUIRE_MESSAGE(std::fabs(s - amax / m) <= 0x1p-23 * amax / m,
                            "chunk " << c << " block " << b << ": scale " << s << ", max|x|/" << m
                                     << " " << amax / m);
      int top = 0;
      for (std::int64_t j = b * B; j < (b + 1) * B; ++j) {
        const int qv = value_at(q.bytes, chunk, c, j, f);
        BOOST_REQUIRE(qv >= -m && qv <= m);
        top = std::max(top, std::abs(qv));
        if (c * chunk + j >= end) BOOST_REQUIRE_MESSAGE(qv == 0, "padding " << j << " is " << qv);
      }
      if (amax > 0) BOOST_REQUIRE_EQUAL(top, m);  // the block's maximum uses the full range
      for (std::int64_t i = first; i < end; ++i) {
        // s is rounded to fp32: where x / s is a tie (x = max|x| / 2 in
        // int8) q·s may miss x by s/2 plus q ulps of s.
        const double bound = s / 2 + m * s * 0x1p-22 + out_eps * std::fabs(dq[i]);
        BOOST_REQUIRE_MESSAGE(std::fabs(v[i] - dq[i]) <= bound,
                              "element " << i << ": " << v[i] << " dequantizes to " << dq[i]
                                         << ", more than " << bound << " away");
      }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(quantize)

BOOST_AUTO_TEST_CASE(within_half_a_scale_for_odd_chunks) {
  auto gen = fresh_generator();
  for (const QuantFormat f : kFormats)
    for (const DType src : {DType::f32, DType::bf16, DType::f16})
      for (const auto& [chunk, chunks] : std::vector<std::pair<std::int64_t, std::int64_t>>{
               {1, 1}, {7, 3}, {255, 2}, {256, 3}, {257, 1}, {1031, 4}, {4099, 2}}) {
        BOOST_TEST_CONTEXT(kernels::quant_format_name(f)
                           << " " << dtype_name(src) << " chunks of " << chunk << " x " << chunks) {
          // Magnitudes that differ by block: the scales are per block.
          Tensor x = random_tensor(chunk * chunks, src, gen, -3.0, 3.0);
          x.set_item(0, 1e-3);
          const Quantized q = round_trip(x, chunk, f);
          check_bound(x, q, chunk, f, 0);
          // bf16 and f16 outputs add their own rounding to nearest.
          check_bound(x, round_trip(x, chunk, f, DType::bf16), chunk, f, 0x1p-8);
          check_bound(x, round_trip(x, chunk, f, DType::f16), chunk, f, 0x1p-11);
        }
      }
}

BOOST_AUTO_TEST_CASE(zero_blocks_stay_zero) {
  auto gen = fresh_generator();
  const std::int64_t chunk = 600;
  for (const QuantFormat f : kFormats) {
    const std::int64_t B = block_of(f);
    Tensor x = random_tensor(2 * chunk, DType::f32, gen);
    for (std::int64_t i = chunk + B; i < chunk + 2 * B; ++i)
      x.set_item(i, 0.0);  // block 1 of chunk 1
    const Quantized q = round_trip(x, chunk, f);
    BOOST_REQUIRE_EQUAL(scale_at(q.bytes, chunk, 1, 1, f), 0.0f);
    for (std::int64_t i = chunk + B; i < chunk + 2 * B; ++i)
      BOOST_REQUIRE_EQUAL(q.values.item(i), 0.0);
    check_bound(x, q, chunk, f, 0);
    // A chunk of zeros only.
    const Quantized z = round_trip(Tensor::zeros({300}, DType::f32), 300, f);
    for (double v : z.values.to_doubles()) BOOST_REQUIRE_EQUAL(v, 0.0);
  }
}

BOOST_AUTO_TEST_CASE(non_finite_values_turn_their_block_into_nan) {
  auto gen = fresh_generator();
  const std::int64_t chunk = 700;  // int8: blocks [0, 256), [256, 512), [512, 700) of each chunk
  for (const QuantFormat f : kFormats)
    for (const double bad : {double(NAN), double(INFINITY), -double(INFINITY)}) {
      Tensor x = random_tensor(2 * chunk, DType::f32, gen);
      x.set_item(chunk + 300, bad);  // chunk 1, block 1
      for (const DType out : {DType::f32, DType::bf16}) {
        const Quantized q = round_trip(x, chunk, f, out);
        for (std::int64_t i = 0; i < x.numel(); ++i) {
          const std::int64_t first = chunk + 300 / block_of(f) * block_of(f);
          const bool in_block = i >= first && i < first + block_of(f);
          BOOST_REQUIRE_MESSAGE(std::isnan(q.values.item(i)) == in_block,
                                kernels::quant_format_name(f)
                                    << ": element " << i << " is " << q.values.item(i) << " with "
                                    << bad << " at " << chunk + 300);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(the_same_bits_on_every_run) {
  auto gen = fresh_generator();
  Tensor x = random_tensor(3 * 1001, DType::f32, gen);
  for (const QuantFormat f : kFormats) {
    const Quantized a = round_trip(x, 1001, f), b = round_trip(x, 1001, f);
    BOOST_REQUIRE(std::memcmp(a.bytes.data_ptr(), b.bytes.data_ptr(), a.bytes.nbytes()) == 0);
    BOOST_REQUIRE(std::memcmp(a.values.data_ptr(), b.values.data_ptr(), a.values.nbytes()) == 0);
  }
}

BOOST_AUTO_TEST_CASE(int4_packs_two_values_a_byte_low_nibble_first) {
  // Note [Blockwise int4 quantization]: max|x| = 7 gives scale 1, so the
  // values are x rounded to nearest even (2.5 -> 2, 3.5 -> 4, -3.5 -> -4)
  // and clamped to -7..7; element 2k in the low nibble of byte k.
  const std::vector<double> x = {7, -7, 1, -1, 0, 3.5, 2.5, -3.5, -0.5, 6.6, 5};
  const Quantized q =
      round_trip(Tensor::from_doubles(x, DType::f32), std::int64_t(x.size()), QuantFormat::int4);
  const std::int64_t values = kernels::kInt4Block / 2;
  BOOST_REQUIRE_EQUAL(q.bytes.numel(), 4 + values);
  BOOST_REQUIRE_EQUAL(scale_at(q.bytes, 11, 0, 0, QuantFormat::int4), 1.0f);
  const auto* p = static_cast<const std::uint8_t*>(q.bytes.data_ptr()) + 4;
  const std::vector<int> want = {0x97, 0xf1, 0x40, 0xc2, 0x70, 0x05};  // (7,-7) (1,-1) (0,4) ...
  for (std::size_t k = 0; k < want.size(); ++k)
    BOOST_REQUIRE_MESSAGE(p[k] == want[k],
                          "byte " << k << " is " << int(p[k]) << ", not " << want[k]);
  for (std::int64_t k = std::int64_t(want.size()); k < values; ++k)
    BOOST_REQUIRE_EQUAL(int(p[k]), 0);  // padding
  const std::vector<double> back = {7, -7, 1, -1, 0, 4, 2, -4, 0, 7, 5};
  BOOST_REQUIRE(q.values.to_doubles() == back);
}

BOOST_AUTO_TEST_CASE(every_chunk_is_packed_on_its_own) {
  // Chunks of odd length: the quantized buffer is each chunk quantized alone,
  // side by side (a chunk never shares a byte with the next), as the
  // all_to_all of Note [Quantized gradient reduce-scatter] needs.
  auto gen = fresh_generator();
  for (const QuantFormat f : kFormats)
    for (const std::int64_t chunk : {1, 5, 63, 65, 257, 1031}) {
      const std::int64_t chunks = 3, bytes = chunk_bytes(chunk, f);
      const Tensor x = random_tensor(chunks * chunk, DType::f32, gen);
      const Quantized all = round_trip(x, chunk, f);
      BOOST_REQUIRE_EQUAL(all.bytes.numel(), chunks * bytes);
      for (std::int64_t c = 0; c < chunks; ++c) {
        const Quantized one = round_trip(x.slice(c * chunk, chunk), chunk, f);
        BOOST_REQUIRE_MESSAGE(
            std::memcmp(static_cast<const std::uint8_t*>(all.bytes.data_ptr()) + c * bytes,
                        one.bytes.data_ptr(), bytes) == 0,
            kernels::quant_format_name(f)
                << ": chunk " << c << " of " << chunk << " differs from its own quantization");
      }
    }
}

BOOST_AUTO_TEST_CASE(sum_of_chunks_in_chunk_order) {
  // dequantize_sum is the f32 sum, in chunk order, of the chunks'
  // dequantized values, divided once: within the sum of the chunks' half
  // scales (and the f32 additions) of the float64 sum of the originals.
  auto gen = fresh_generator();
  for (const QuantFormat f : kFormats)
    for (const auto& [n, chunks] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {7, 3}, {300, 4}, {1031, 2}}) {
      BOOST_TEST_CONTEXT(kernels::quant_format_name(f) << " " << chunks << " chunks of " << n) {
        const Tensor x = random_tensor(n * chunks, DType::f32, gen);
        const Quantized q = round_trip(x, n, f);
        for (const int divisor : {1, static_cast<int>(chunks)}) {
          Tensor sum = Tensor::empty({n}, DType::f32);
          poison(sum);
          kernels::dequantize_sum(sum, q.bytes, chunks, divisor, f);
          const std::vector<double> v = x.to_doubles(), dq = q.values.to_doubles();
          for (std::int64_t j = 0; j < n; ++j) {
            float want = 0.0f;
            double exact = 0, bound = 0;
            for (std::int64_t c = 0; c < chunks; ++c) {
              want = want + static_cast<float>(dq[c * n + j]);
              exact += v[c * n + j];
              const double s = scale_at(q.bytes, n, c, j / block_of(f), f);
              bound += s / 2 + max_value(f) * s * 0x1p-22;
            }
            want = want / static_cast<float>(divisor);
            BOOST_REQUIRE_EQUAL(sum.item(j), double(want));
            BOOST_REQUIRE_LE(std::fabs(sum.item(j) - exact / divisor),
                             (bound + 0x1p-22 * chunks * std::fabs(exact)) / divisor);
          }
        }
      }
    }
  Tensor out = Tensor::empty({5}, DType::f32);
  BOOST_CHECK_THROW(kernels::dequantize_sum_int8(out, Tensor::empty({260}, DType::u8), 2, 1),
                    InvalidArgument);
  BOOST_CHECK_THROW(kernels::dequantize_sum_int8(out, Tensor::empty({260}, DType::u8), 1, 0),
                    InvalidArgument);
  BOOST_CHECK_THROW(
      kernels::dequantize_sum(out, Tensor::empty({260}, DType::u8), 1, 1, QuantFormat::int4),
      InvalidArgument);  // 4 + kInt4Block / 2 bytes a chunk of 5 in int4
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_named) {
  Tensor x = Tensor::zeros({10}, DType::f32);
  Tensor q = Tensor::empty({kernels::quantized_bytes(10, 5)}, DType::u8);
  BOOST_CHECK_EQUAL(q.numel(), 2 * 260);
  BOOST_CHECK_THROW(kernels::quantized_bytes(10, 3), InvalidArgument);
  BOOST_CHECK_THROW(kernels::quantize_int8(q, x, 3), InvalidArgument);
  BOOST_CHECK_THROW(kernels::quantize_int8(q, x, 10), InvalidArgument);  // 260 bytes, not 520
  BOOST_CHECK_THROW(kernels::quantize_int8(Tensor::empty({520}, DType::f32), x, 5),
                    InvalidArgument);
  BOOST_CHECK_THROW(kernels::dequantize_int8(Tensor::empty({10}, DType::i32), q, 5),
                    InvalidArgument);
  BOOST_CHECK_EQUAL(kernels::quantized_bytes(0, 0), 0);
  const std::int64_t int4_block = 4 + kernels::kInt4Block / 2;  // bytes
  BOOST_CHECK_EQUAL(kernels::quantized_bytes(10, 5, QuantFormat::int4), 2 * int4_block);
  BOOST_CHECK_EQUAL(kernels::quantized_bytes(2 * (kernels::kInt4Block + 1), kernels::kInt4Block + 1,
                                             QuantFormat::int4),
                    2 * 2 * int4_block);
  BOOST_CHECK_THROW(kernels::quantize(q, x, 5, QuantFormat::int4), InvalidArgument);  // 520 bytes
  BOOST_CHECK_THROW(kernels::quantized_bytes(10, 5, static_cast<QuantFormat>(7)), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
