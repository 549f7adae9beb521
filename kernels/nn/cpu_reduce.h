// Row sums for the CPU twins in a fixed order that g++ can vectorise: eight
// interleaved partial sums, combined pairwise at the end. The order depends
// on n only, never on threads, so results stay deterministic.
#pragma once

#include <cstdint>

namespace zrt::kernels {

// Σ term(i) for i in [0, n).
template <class A, class Term>
A lane_sum(std::int64_t n, const Term& term) {
  constexpr int kLanes = 8;
  A part[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] += term(i + l);
  for (int l = 0; i < n; ++i, ++l) part[l] += term(i);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int l = 0; l < width; ++l) part[l] += part[l + width];
  return part[0];
}

}  // namespace zrt::kernels
