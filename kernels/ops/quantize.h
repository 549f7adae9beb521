// Blockwise int8 and int4 quantization of floating buffers cut into equal
// chunks (one rank's shard each), and back (Note [Blockwise int8
// quantization], Note [Blockwise int4 quantization] in quantize_math.h):
// what a quantized all-gather or reduce-scatter moves.
#pragma once

#include <cstdint>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// The quantized values: int8 (-127..127) or int4 (-7..7, two to a byte),
// each block with an fp32 scale.
enum class QuantFormat : std::uint8_t { int8, int4 };
const char* quant_format_name(QuantFormat f);  // "int8", "int4"

// Bytes of `numel` elements quantized in chunks of `chunk_numel` (a divisor
// of numel; any chunk size when numel is 0).
std::int64_t quantized_bytes(std::int64_t numel, std::int64_t chunk_numel,
                             QuantFormat format = QuantFormat::int8);

// dst (u8, quantized_bytes(src.numel(), chunk_numel, format)) = src (f32,
// bf16 or f16) quantized chunk by chunk: each chunk's scales, then its values.
void quantize(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel, QuantFormat format,
              Stream stream = {});

// dst (f32, bf16 or f16) = src (u8, as quantize writes it) dequantized,
// rounded to dst's dtype to nearest even.
void dequantize(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel, QuantFormat format,
                Stream stream = {});

// dst (f32, n elements) = the sum of the `chunks` quantized chunks of n
// elements in src (u8, as quantize writes them), dequantized and added in
// chunk order in f32, divided by `divisor` (1: the sum; the rank count: the
// average). A rank of a quantized reduce-scatter sums what it received so
// (Note [Quantized gradient reduce-scatter]).
void dequantize_sum(const Tensor& dst, const Tensor& src, std::int64_t chunks, int divisor,
                    QuantFormat format, Stream stream = {});

inline void quantize_int8(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel,
                          Stream stream = {}) {
  quantize(dst, src, chunk_numel, QuantFormat::int8, stream);
}
inline void dequantize_int8(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel,
                            Stream stream = {}) {
  dequantize(dst, src, chunk_numel, QuantFormat::int8, stream);
}
inline void dequantize_sum_int8(const Tensor& dst, const Tensor& src, std::int64_t chunks,
                                int divisor, Stream stream = {}) {
  dequantize_sum(dst, src, chunks, divisor, QuantFormat::int8, stream);
}

}  // namespace zrt::kernels
