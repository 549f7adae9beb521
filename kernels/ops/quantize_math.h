// Per-block arithmetic of the blockwise int8 and int4 quantizations, shared
// by the CUDA kernels and the CPU twins.
//
// Note [Blockwise int8 quantization]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A buffer is cut into chunks of n elements (one rank's shard each), and a
// chunk into blocks of kQuantBlock = 256 elements; its last block is padded
// with zeros. Each block has one fp32 scale s = max|x| / 127 and one int8 per
// element, q = round-to-nearest-even(x / s) (|q| <= 127, symmetric), which
// dequantizes to q·s: |x - q·s| <= s/2 up to the rounding of x / s. A
// quantized chunk is its ceil(n / 256) scales (4 bytes each, little endian,
// read and written a byte at a time so a chunk may sit at any address)
// followed by its blocks' int8 values, 260 bytes a block: 1.016 bytes an
// element, against 4 (fp32) or 2 (bf16). The scale is fp32, not the compute
// dtype: a bf16 scale would add its own rounding to every element of the
// block, and costs 2 bytes a block less only.
//  - A block of zeros has s = 0; its values are 0 and dequantize to 0 (no
//    division by zero, no NaN).
//  - A block holding NaN or Inf has a NaN scale and zero values, and every
//    element dequantizes to NaN: the non-finite value is not lost in int8,
//    so what detects it downstream (a non-finite loss or gradient) still
//    does. The NaN is one fixed bit pattern on both devices.
//  - A block whose max|x| is below 127 times the smallest subnormal has s = 0
//    and dequantizes to zeros.
// max is exact and the division and the product are single IEEE roundings
// (no contraction, Note [Two precision rules]), so the CUDA kernels and the
// CPU twins give the same bits for any thread split.
//
// Note [Blockwise int4 quantization]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The int4 format (QuantFormat::int4, --reduce-dtype int4) is the int8 one
// (Note [Blockwise int8 quantization]) with 4-bit values in blocks of
// kInt4Block = 64: the same chunks and fp32 scales, now s = max|x| / 7 and
// q in -7..7, round to nearest even. -8 is left unused so the code stays
// symmetric (q and -q have the same magnitude, as in int8): a block's
// maximum maps to ±7 and |x - q·s| <= s/2 = max|x| / 14. Two values share a
// byte, element 2k of a block in the low nibble and 2k + 1 in the high one
// (two's complement). A block's 64 values fill 32 whole bytes, so every
// chunk, and every block of it, starts on a byte: a chunk of odd length
// pads its last block with zeros as int8 does, and the chunks of an
// all_to_all are packed each on its own, never sharing a byte. 36 bytes a
// block: 0.5625 bytes an element, 7.1x fewer than fp32. Zero blocks,
// non-finite blocks (NaN scale, zero values, NaN on dequantization) and the
// bit-identical CPU and CUDA results are int8's.
// Why 64 and not int8's 256: with round to nearest every element under
// s/2 = max|x| / 14 of its block becomes 0, and a smaller block has a
// smaller maximum. On 2^16 heavy-tailed samples (Laplace; Student-t with 3
// degrees) the relative L2 error of one rank's values is 18% and 27% with
// blocks of 256, 14% and 18% with 64, 12% and 15% with 32 (int8: 1% and
// 1.6%); 32 would cost 6.4x fewer bytes than fp32 instead of 7.1x. At
// the default --lr 3e-3 the small GPT's runs are chaotic (a bf16 reduce
// alone moves the loss by up to 30%), so its losses rank the blocks only
// loosely (256: 21% / 11% above fp32, 64: 13% / 5%, seeds 1 and 2). At
// --lr 1e-3 (4 ranks, bf16, 300 steps, mean loss of the last 50, seeds
// 1-4), int4 with blocks of 64 ends 0.5-1.1% above the fp32 reduce, int8
// 0.1-0.7%.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

inline constexpr std::int64_t kQuantBlock = 256;
inline constexpr float kQuantMax = 127.0f;
// fn(std::integral_constant<int, Bits>) for bits 8 or 4 (host code).
template <class F>
void with_quant_bits(int bits, F&& fn) {
  if (bits == 8)
    fn(std::integral_constant<int, 8>{});
  else
    fn(std::integral_constant<int, 4>{});
}

// The largest |q| of a format of Bits (8 or 4) bits, and a block's value bytes.
template <int Bits>
inline constexpr float kQuantMaxOf = Bits == 8 ? 127.0f : 7.0f;
// Elements a block: 256 in int8, 64 in int4 (Note [Blockwise int4 quantization]).
inline constexpr std::int64_t kInt4Block = 64;
template <int Bits>
inline constexpr std::int64_t kQuantBlockOf = Bits == 8 ? kQuantBlock : kInt4Block;
template <int Bits>
inline constexpr std::int64_t kQuantValueBytes = kQuantBlockOf<Bits>* Bits / 8;
static_assert(kQuantMaxOf<8> == kQuantMax && kQuantValueBytes<4> * 2 == kInt4Block);
inline constexpr std::uint32_t kQuantNaN = 0x7fc00000u;  // the one NaN the ops write
inline constexpr float kFloatMax = 3.40282347e+38f;

template <int Bits = 8>
ZRT_HD inline constexpr std::int64_t quant_blocks(std::int64_t n) {
  return (n + kQuantBlockOf<Bits> - 1) / kQuantBlockOf<Bits>;
}
// Bytes of one quantized chunk of n elements: its scales, then its values.
template <int Bits = 8>
ZRT_HD inline constexpr std::int64_t quantized_chunk_bytes(std::int64_t n) {
  return quant_blocks<Bits>(n) * (kQuantValueBytes<Bits> + 4);
}

// |x| for the block's maximum: +Inf for NaN and Inf, so the maximum of a
// block that holds one is not finite.
ZRT_HD inline float quant_magnitude(float x) {
  const float a = fabsf(x);
  return a <= kFloatMax ? a : u32_as_f32(0x7f800000u);
}

template <int Bits = 8>
ZRT_HD inline float quant_scale(float amax) {
  return amax <= kFloatMax ? amax / kQuantMaxOf<Bits> : u32_as_f32(kQuantNaN);
}

template <int Bits = 8>
ZRT_HD inline int quantize_element(float x, float scale) {
  if (!(scale > 0.0f)) return 0;  // a block of zeros, or a non-finite block (NaN scale)
  const float q = fminf(fmaxf(rintf(x / scale), -kQuantMaxOf<Bits>), kQuantMaxOf<Bits>);
  return static_cast<int>(q);
}

// q's bits in field e of a value byte (e < 8 / Bits; field 0 the lowest).
template <int Bits>
ZRT_HD inline std::uint8_t quant_field(int q, int e) {
  return static_cast<std::uint8_t>((static_cast<unsigned>(q) & ((1u << Bits) - 1)) << (Bits * e));
}

// Value j of a chunk's values (which start with block 0's): an int8, or the
// sign-extended nibble e = j % 2 of byte j / 2.
template <int Bits>
ZRT_HD inline int load_value(const std::uint8_t* values, std::int64_t j) {
  if constexpr (Bits == 8) {
    return static_cast<std::int8_t>(values[j]);
  } else {
    const int nibble = (values[j / 2] >> (4 * (j % 2))) & 0xf;
    return (nibble ^ 8) - 8;
  }
}

ZRT_HD inline float dequantize_element(int q, float scale) {
  if (scale != scale) return u32_as_f32(kQuantNaN);
  return static_cast<float>(q) * scale;
}

ZRT_HD inline float load_scale(const std::uint8_t* p) {
  return u32_as_f32(std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
                    std::uint32_t(p[3]) << 24);
}

ZRT_HD inline void store_scale(std::uint8_t* p, float s) {
  const std::uint32_t u = f32_as_u32(s);
  for (int k = 0; k < 4; ++k) p[k] = static_cast<std::uint8_t>(u >> (8 * k));
}

// Element j of one quantized chunk of `blocks` blocks at q, dequantized.
template <int Bits>
ZRT_HD inline float dequantize_chunk_element(const std::uint8_t* q, std::int64_t blocks,
                                             std::int64_t j) {
  return dequantize_element(load_value<Bits>(q + 4 * blocks, j),
                            load_scale(q + 4 * (j / kQuantBlockOf<Bits>)));
}

// Element j of the sum of `chunks` consecutive quantized chunks of n
// elements, dequantized and added in chunk order, divided by `divisor`.
template <int Bits = 8>
ZRT_HD inline float dequantize_sum_element(const std::uint8_t* src, std::int64_t chunks,
                                           std::int64_t n, std::int64_t j, float divisor) {
  const std::int64_t bytes = quantized_chunk_bytes<Bits>(n), blocks = quant_blocks<Bits>(n);
  float sum = 0.0f;
  for (std::int64_t c = 0; c < chunks; ++c)
    sum = sum + dequantize_chunk_element<Bits>(src + c * bytes, blocks, j);
  return sum / divisor;
}

}  // namespace zrt::kernels
