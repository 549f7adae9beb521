// Per-block arithmetic of the squared L2 norm and non-finite check, shared by
// the CUDA kernels and the CPU twin.
//
// Note [Deterministic norm]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The sum has one fixed order for a given size, whatever the device or the
// thread count. The buffer is cut into blocks of kNormBlock elements. In a
// block, lane j (of kNormLanes) sums in f32 the squares of elements j,
// j + kNormLanes, j + 2*kNormLanes, ...; the lanes are then added pairwise as
// a halving tree (lane j += lane j + s for s = kNormLanes/2, ..., 1). The
// GPU gives each thread a few neighbouring lanes (Note [Norm lanes in
// registers] in norm.cu); the CPU runs the lanes as a vector loop. The block
// sums are reduced by the same lane-and-tree scheme in f64.
// Non-finite elements are found by the same pass summing x - x, which is 0
// for finite x and NaN for Inf or NaN: the block's sum is NaN iff the block
// holds a non-finite value (independent of squares overflowing to Inf).
#pragma once

#include <cstdint>

#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

inline constexpr int kNormLanes = 256;
inline constexpr int kNormPerLane = 16;
inline constexpr std::int64_t kNormBlock = std::int64_t(kNormLanes) * kNormPerLane;

inline constexpr std::int64_t norm_blocks(std::int64_t n) {
  return (n + kNormBlock - 1) / kNormBlock;
}

// Lane j's contribution: adds the squares (and x - x) of its elements of the
// block starting at `block` (elements at or past n count as absent).
template <class T>
ZRT_HD inline void norm_lane(const T* x, std::int64_t block_begin, std::int64_t n, int lane,
                             float& sum_sq, float& non_finite) {
  for (int k = 0; k < kNormPerLane; ++k) {
    const std::int64_t i = block_begin + std::int64_t(k) * kNormLanes + lane;
    if (i < n) {
      const float v = to_f32(x[i]);
      sum_sq = sum_sq + v * v;
      non_finite = non_finite + (v - v);
    }
  }
}

}  // namespace zrt::kernels
