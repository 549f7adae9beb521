// CUDA launchers of the blockwise int8 and int4 quantizations (see
// quantize_math.h for the per-block arithmetic); `bits` is 8 or 4.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `chunks` chunks of `chunk` elements of src (f32, bf16 or f16) into dst.
void launch_quantize(std::uint8_t* dst, const void* src, DType src_dtype, std::int64_t chunks,
                     std::int64_t chunk, int bits, cudaStream_t stream);
void launch_dequantize(void* dst, DType dst_dtype, const std::uint8_t* src, std::int64_t chunks,
                       std::int64_t chunk, int bits, cudaStream_t stream);

void launch_dequantize_sum(float* dst, const std::uint8_t* src, std::int64_t chunks, std::int64_t n,
                           float divisor, int bits, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
