// Helpers of the layer tests: random tensors, parameters with poisoned
// gradients, and the scalar objective sum(out * r) used to probe gradients.
#pragma once

#include <random>

#include "zrt/model_zoo/layers/layer.h"

namespace zrt::model_zoo::test {

inline Tensor random_tensor(const Shape& shape, DType dtype, std::mt19937& gen, double lo = -1.0,
                            double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, dtype, Device::cpu(), shape);
}

// A parameter with random values and a gradient poisoned with NaN, so a
// backward that fails to write it is caught.
inline Param random_param(const Shape& shape, DType dtype, std::mt19937& gen) {
  return Param{random_tensor(shape, dtype, gen), Tensor::full(shape, NAN, dtype)};
}

inline double dot(const Tensor& a, const Tensor& b) {
  auto x = a.to_doubles(), y = b.to_doubles();
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_doubles(), y = b.to_doubles();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return x.size() == y.size() ? m : INFINITY;
}

inline double max_abs(const Tensor& a) {
  double m = 0;
  for (double v : a.to_doubles()) m = std::max(m, std::abs(v));
  return m;
}

}  // namespace zrt::model_zoo::test
