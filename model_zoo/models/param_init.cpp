#include "zrt/model_zoo/models/param_init.h"

#include "zrt/kernels/ops/fill.h"
#include "zrt/kernels/ops/random_fill.h"

#include <cmath>
#include <numbers>

namespace zrt::model_zoo {

double ParamInitStream::uniform01() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

double ParamInitStream::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform01();  // (0, 1]: log stays finite
  const double u2 = uniform01();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

Tensor ParamInitStream::normal_tensor(const Shape& shape, double std) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(std * normal());
  return t;
}

Tensor ParamInitStream::uniform_tensor(const Shape& shape, double lo, double hi) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(lo + (hi - lo) * uniform01());
  return t;
}

void fill_param_init(const Tensor& dst, const ParamInit& init, std::uint64_t seed,
                     const std::string& fqn, std::int64_t first_index, Stream stream) {
  using K = kernels::RandomInit::Kind;
  switch (init.kind) {
    case ParamInit::Kind::constant:
      return kernels::fill(dst, init.a, stream);
    case ParamInit::Kind::normal:
      return kernels::random_fill(dst, {K::normal, init.a, init.b}, seed,
                                  kernels::random_stream_of(fqn), first_index, stream);
    case ParamInit::Kind::uniform:
      return kernels::random_fill(dst, {K::uniform, init.a, init.b}, seed,
                                  kernels::random_stream_of(fqn), first_index, stream);
  }
}

Tensor ParamInitStream::constant_tensor(const Shape& shape, double value) {
  return Tensor::full(shape, value, DType::f32);
}

}  // namespace zrt::model_zoo
