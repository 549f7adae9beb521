// Per-element arithmetic of the fused AdamW step, shared by the CUDA kernel
// and the CPU twin.
//
// Note [AdamW order of operations]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The update reproduces torch.optim.AdamW (single-tensor path) operation by
// operation, in f32, with every scalar coefficient computed in double on the
// host and rounded to f32 once, as PyTorch does with its Python scalars:
//   p = p * (1 - lr*wd)
//   m = m * beta1 + (1 - beta1) * g
//   v = v * beta2 + ((1 - beta2) * g) * g
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p = p + (-(lr / (1 - beta1^t)) * m) / denom
// Elements outside the weight-decay ranges use the factor 1, which leaves p
// unchanged exactly. The gradient is first multiplied by `grad_scale` (1 for
// plain AdamW), which folds unscaling or clipping into the same pass.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "zrt/kernels/hd.h"
#include "zrt/runtime/float16.h"

namespace zrt::kernels {

struct AdamWCoefficients {
  float decay;  // 1 - lr * weight_decay
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float neg_step_size;          // -lr / (1 - beta1^step)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  float grad_scale;
};

// A piece of the shard that either decays or not; pieces tile the shard.
struct AdamWPiece {
  std::int64_t begin;
  std::int64_t end;
  bool decayed;
};

// Updates one element in place. `decay` is c.decay or 1.
template <class G>
ZRT_HD inline void adamw_element(float& p, float& m, float& v, G grad, float decay,
                                 const AdamWCoefficients& c) {
  const float g = to_f32(grad) * c.grad_scale;
  p = p * decay;
  m = m * c.beta1 + c.one_minus_beta1 * g;
  v = v * c.beta2 + (c.one_minus_beta2 * g) * g;
  const float denom = sqrtf(v) / c.bias_correction2_sqrt + c.eps;
  p = p + (c.neg_step_size * m) / denom;
}

// The low-precision copy of the updated parameter is optional; NoParamOut
// stands for "not written".
struct NoParamOut {};

// Steps element i of a shard (param p, moments m and v, gradient g) in place
// and writes the updated parameter to out[i] unless L is NoParamOut: the loop
// body of the CUDA kernel and of the CPU twin.
template <class G, class L>
ZRT_HD inline void adamw_element_at(float* p, float* m, float* v, const G* g, L* out,
                                    std::int64_t i, float decay, const AdamWCoefficients& c) {
  float pi = p[i], mi = m[i], vi = v[i];
  adamw_element(pi, mi, vi, g[i], decay, c);
  p[i] = pi;
  m[i] = mi;
  v[i] = vi;
  if constexpr (!std::is_same_v<L, NoParamOut>) out[i] = from_f32<L>(pi);
}

}  // namespace zrt::kernels
