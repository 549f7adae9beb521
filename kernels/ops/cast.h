// cast: copy between f32, bf16 and f16 (round to nearest even), and f32 ->
// bf16 with stochastic rounding (Note [Stochastic rounding] in cast_math.h).
#pragma once

#include <cstdint>

#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// dst[i] = src[i] converted to dst's dtype. Equal numel; dtypes in {f32,
// bf16, f16}, f32 -> f64 (exact: values the host sums in double), or any
// dtype when both are the same (a plain copy). dst and src must not overlap
// unless they are the same view.
void cast(const Tensor& dst, const Tensor& src, Stream stream = {});

// dst (bf16) = src (f32) with stochastic rounding: element i uses the random
// bits of (seed, i), so a given seed gives the same bits everywhere.
void cast_stochastic(const Tensor& dst, const Tensor& src, std::uint64_t seed, Stream stream = {});

}  // namespace zrt::kernels
