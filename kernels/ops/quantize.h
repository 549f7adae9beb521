// Blockwise int8 quantization of floating buffers cut into equal chunks
// (one rank's shard each), and back (Note [Blockwise int8 quantization] in
// quantize_math.h): what a quantized all-gather moves.
#pragma once

#include <cstdint>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// Bytes of `numel` elements quantized in chunks of `chunk_numel` (a divisor
// of numel; any chunk size when numel is 0).
std::int64_t quantized_bytes(std::int64_t numel, std::int64_t chunk_numel);

// dst (u8, quantized_bytes(src.numel(), chunk_numel)) = src (f32, bf16 or
// f16) quantized chunk by chunk: each chunk's scales, then its int8 values.
void quantize_int8(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel,
                   Stream stream = {});

// dst (f32, bf16 or f16) = src (u8, as quantize_int8 writes it) dequantized,
// rounded to dst's dtype to nearest even.
void dequantize_int8(const Tensor& dst, const Tensor& src, std::int64_t chunk_numel,
                     Stream stream = {});

// dst (f32, n elements) = the sum of the `chunks` quantized chunks of n
// elements in src (u8, as quantize_int8 writes them), dequantized and added
// in chunk order in f32, divided by `divisor` (1: the sum; the rank count:
// the average). A rank of a quantized reduce-scatter sums what it received
// so (Note [Quantized gradient reduce-scatter]).
void dequantize_sum_int8(const Tensor& dst, const Tensor& src, std::int64_t chunks, int divisor,
                         Stream stream = {});

}  // namespace zrt::kernels
