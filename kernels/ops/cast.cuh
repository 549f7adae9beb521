// CUDA launchers of cast (see cast_math.h for the per-element arithmetic).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "zrt/runtime/dtype.h"

namespace zrt::kernels::cuda {

// dst/src dtypes in {f32, bf16, f16}.
// `simple`: one element per index, else 16-byte vector loads where every
// pointer is aligned (Note [Fast kernels and their simple references]); the
// results are the same bits.
void launch_cast(void* dst, DType dst_dtype, const void* src, DType src_dtype, std::int64_t n,
                 bool simple, cudaStream_t stream);
void launch_widen_f32_to_f64(double* dst, const float* src, std::int64_t n, cudaStream_t stream);
void launch_cast_stochastic_bf16(std::uint16_t* dst, const float* src, std::int64_t n,
                                 std::uint64_t seed, bool simple, cudaStream_t stream);
// A cast between equal dtypes: `nbytes` bytes from device memory to device memory.
void launch_copy(void* dst, const void* src, std::size_t nbytes, cudaStream_t stream);

}  // namespace zrt::kernels::cuda
