// The random stream model parameters are initialised from.
//
// Note [Parameter init stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Initial values must be identical on every rank and on every platform, so
// they do not use std::normal_distribution (whose algorithm the standard
// leaves to the library). One std::mt19937_64 seeded with the seed (its
// output sequence is fixed by the standard) feeds:
//   uniform01 = (next() >> 11) · 2^-53                         in [0, 1)
//   normal: Box-Muller on u1 = 1 - uniform01 (in (0, 1]), u2 = uniform01:
//     r = sqrt(-2 ln u1); z0 = r cos(2π u2), then z1 = r sin(2π u2)
//     (pairs are used in order: z0, z1, z0', z1', ...).
// A model draws for its parameters one after another in the order of
// units() and, within a unit, module order; parameters set to constants
// (biases, LayerNorm) draw nothing.
#pragma once

#include <cstdint>
#include <random>

#include "zrt/runtime/tensor.h"

namespace zrt::model_zoo {

class ParamInitStream {
 public:
  explicit ParamInitStream(std::uint64_t seed) : gen_(seed) {}
  double uniform01();
  double normal();
  // A new fp32 cpu tensor filled with normal(0, std) / uniform(lo, hi) / a constant.
  Tensor normal_tensor(const Shape& shape, double std);
  Tensor uniform_tensor(const Shape& shape, double lo, double hi);
  static Tensor constant_tensor(const Shape& shape, double value);

 private:
  std::mt19937_64 gen_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace zrt::model_zoo
