// CUDA launchers of the blockwise int8 quantization (see quantize_math.h for
// the per-block arithmetic).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// `chunks` chunks of `chunk` elements of src (f32, bf16 or f16) into dst.
void launch_quantize_int8(std::uint8_t* dst, const void* src, DType src_dtype, std::int64_t chunks,
                          std::int64_t chunk, cudaStream_t stream);
void launch_dequantize_int8(void* dst, DType dst_dtype, const std::uint8_t* src,
                            std::int64_t chunks, std::int64_t chunk, cudaStream_t stream);

void launch_dequantize_sum_int8(float* dst, const std::uint8_t* src, std::int64_t chunks,
                                std::int64_t n, float divisor, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
