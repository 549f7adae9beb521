// Per-element arithmetic of cast, shared by the CUDA kernel and the CPU twin.
//
// Note [Stochastic rounding]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// f32 -> bf16 with stochastic rounding adds 16 random bits below the kept
// mantissa and truncates: the result is one of the two bf16 neighbours of x,
// the upper one with probability (dropped bits)/2^16, so the rounding is
// unbiased. The random bits come from a counter-based hash of (seed, element
// index), never from a stateful generator, so the result depends only on the
// seed and the index: the same on CPU and GPU and for any thread split.
// NaN and Inf take the round-to-nearest-even path (they stay NaN / Inf).
#pragma once

#include <cstdint>

#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

// splitmix64's finaliser over (seed, index): a well-mixed 64-bit value.
ZRT_HD inline std::uint64_t counter_hash(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed ^ (index * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// f to bf16 with `noise` (16 random bits, < 2^16) added below the kept
// mantissa: the stochastic rounding itself, whatever drew the bits.
ZRT_HD inline std::uint16_t f32_to_bf16_with_noise(float f, std::uint32_t noise) {
  const std::uint32_t x = f32_as_u32(f);
  const auto noisy = static_cast<std::uint16_t>((x + noise) >> 16);
  // NaN and Inf round to nearest; a select, so CPU loops vectorise.
  return (x & 0x7f800000u) == 0x7f800000u ? f32_to_bf16_rne(f) : noisy;
}

ZRT_HD inline std::uint16_t f32_to_bf16_stochastic(float f, std::uint64_t seed,
                                                   std::uint64_t index) {
  return f32_to_bf16_with_noise(f, static_cast<std::uint32_t>(counter_hash(seed, index) >> 48));
}

// One element of a plain cast (round to nearest even).
template <class D, class S>
ZRT_HD inline D cast_element(S x) {
  return from_f32<D>(to_f32(x));
}

}  // namespace zrt::kernels
