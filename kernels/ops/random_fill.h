// random_fill: a tensor's elements drawn from the counter-based generator of
// Note [Counter-based parameter init] (random_fill_math.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "zrt/kernels/ops/random_fill_math.h"
#include "zrt/runtime/tensor.h"

namespace zrt::kernels {

// Fills `dst` (f32, contiguous) with elements first_index, first_index + 1,
// ... of stream `stream` under `seed`, drawn from `dist`: the same values a
// fill of the whole parameter would put there, on any device.
void random_fill(const Tensor& dst, const RandomInit& dist, std::uint64_t seed,
                 std::uint64_t stream, std::int64_t first_index, Stream s = {});

// A parameter's stream id: the 64-bit FNV-1a hash of its name, stable across
// runs, platforms and layouts.
std::uint64_t random_stream_of(std::string_view name);

}  // namespace zrt::kernels
