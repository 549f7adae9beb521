// Per-block arithmetic of the blockwise int8 quantization, shared by the
// CUDA kernels and the CPU twins.
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
#pragma once

#include <cmath>
#include <cstdint>

#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

inline constexpr std::int64_t kQuantBlock = 256;
inline constexpr float kQuantMax = 127.0f;
inline constexpr std::uint32_t kQuantNaN = 0x7fc00000u;  // the one NaN the ops write
inline constexpr float kFloatMax = 3.40282347e+38f;

ZRT_HD inline constexpr std::int64_t quant_blocks(std::int64_t n) {
  return (n + kQuantBlock - 1) / kQuantBlock;
}
// Bytes of one quantized chunk of n elements: its scales, then its values.
ZRT_HD inline constexpr std::int64_t quantized_chunk_bytes(std::int64_t n) {
  return quant_blocks(n) * (kQuantBlock + 4);
}

// |x| for the block's maximum: +Inf for NaN and Inf, so the maximum of a
// block that holds one is not finite.
ZRT_HD inline float quant_magnitude(float x) {
  const float a = fabsf(x);
  return a <= kFloatMax ? a : u32_as_f32(0x7f800000u);
}

ZRT_HD inline float quant_scale(float amax) {
  return amax <= kFloatMax ? amax / kQuantMax : u32_as_f32(kQuantNaN);
}

ZRT_HD inline std::int8_t quantize_element(float x, float scale) {
  if (!(scale > 0.0f)) return 0;  // a block of zeros, or a non-finite block (NaN scale)
  const float q = fminf(fmaxf(rintf(x / scale), -kQuantMax), kQuantMax);
  return static_cast<std::int8_t>(q);
}

ZRT_HD inline float dequantize_element(std::int8_t q, float scale) {
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

// Element j of the sum of `chunks` consecutive quantized chunks of n
// elements, dequantized and added in chunk order, divided by `divisor`.
ZRT_HD inline float dequantize_sum_element(const std::uint8_t* src, std::int64_t chunks,
                                           std::int64_t n, std::int64_t j, float divisor) {
  const std::int64_t bytes = quantized_chunk_bytes(n), values = 4 * quant_blocks(n);
  float sum = 0.0f;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::uint8_t* q = src + c * bytes;
    sum = sum + dequantize_element(static_cast<std::int8_t>(q[values + j]),
                                   load_scale(q + 4 * (j / kQuantBlock)));
  }
  return sum / divisor;
}

}  // namespace zrt::kernels
