// CPU twins of 16-bit ops run the fp32 kernels on widened copies and round
// once on store (Note [Compute precision]).
#pragma once

#include <cstdint>
#include <vector>

#include "zrt/kernels/nn/element.h"

namespace zrt::kernels {

// x[0, n) loaded into compute type A.
template <class A, class T>
std::vector<A> widened(const T* x, std::int64_t n) {
  std::vector<A> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = load<A>(x[i]);
  return out;
}

// y[0, n) = x rounded to storage type T.
template <class T, class A>
void store_all(const A* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = store<T>(x[i]);
}

}  // namespace zrt::kernels
