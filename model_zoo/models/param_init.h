// How model parameters start, and the sequential stream the synthetic
// datasets are drawn from.
//
// A parameter's initial values are a ParamInit (a constant, or a normal or
// uniform draw) evaluated element by element by the counter-based generator
// of Note [Counter-based parameter init] (kernels/ops/random_fill_math.h),
// keyed by the seed and the parameter's name: any slice of any parameter is
// drawn alone and in parallel, and its values do not depend on the model's
// layout or on which other parameters exist. (A seed's initial weights are
// not those of checkpoints made when zrt drew every parameter in order from
// one sequential stream; a resume reads its weights from the checkpoint, so
// only a fresh run from the same seed differs.)
//
// Note [Parameter init stream]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The synthetic datasets must be identical on every rank and on every
// platform, so they do not use std::normal_distribution (whose algorithm the
// standard leaves to the library). One std::mt19937_64 seeded with the seed
// (its output sequence is fixed by the standard) feeds:
//   uniform01 = (next() >> 11) · 2^-53                         in [0, 1)
//   normal: Box-Muller on u1 = 1 - uniform01 (in (0, 1]), u2 = uniform01:
//     r = sqrt(-2 ln u1); z0 = r cos(2π u2), then z1 = r sin(2π u2)
//     (pairs are used in order: z0, z1, z0', z1', ...).
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "zrt/runtime/tensor.h"

namespace zrt::model_zoo {

// One parameter's initial values.
struct ParamInit {
  enum class Kind { constant, normal, uniform };
  Kind kind = Kind::constant;
  double a = 0;  // constant: the value; normal: the mean; uniform: lo
  double b = 0;  // normal: the standard deviation; uniform: hi
  static ParamInit constant(double value) { return {Kind::constant, value, 0}; }
  static ParamInit normal(double std) { return {Kind::normal, 0, std}; }
  static ParamInit uniform(double lo, double hi) { return {Kind::uniform, lo, hi}; }
};

// Fills `dst` (f32) with elements first_index, first_index + 1, ... of
// parameter `fqn`'s initial values under `seed`, on dst's device.
void fill_param_init(const Tensor& dst, const ParamInit& init, std::uint64_t seed,
                     const std::string& fqn, std::int64_t first_index = 0, Stream stream = {});

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
