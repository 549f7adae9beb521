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
//
// Note [bf16 AdamW moments]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// With bf16 moments (zrt-train --optimizer-state-dtype bf16) m and v are read
// as f32, the step runs in f32 exactly as above (the parameter update uses
// the new m and v unrounded), and the new m and v are stored back rounded
// stochastically (Note [Stochastic rounding] in cast_math.h): 12 bytes per
// parameter instead of 16, the f32 master kept. Round to nearest would lose
// every update smaller than half a bf16 ulp of v (beta2 = 0.999 changes v by
// 0.1% a step, below bf16's 0.4% spacing), freezing v; stochastic rounding
// keeps each stored moment an unbiased estimate of the f32 one.
// Each element takes 32 random bits, four elements to one Philox4x32-10
// call (Note [Counter-based parameter init]) under key (seed mod 2^32,
// seed >> 32) at counter
//   (q mod 2^32, q >> 32, t mod 2^32, s_lo ^ s_hi),  q = j / 4,
// where j is the element's index in its unit's flat parameter, t the AdamW
// step (>= 1) and s the unit's stream id (random_stream_of of the unit's
// name, folded to 32 bits); element j takes word x[j mod 4], m its top 16
// bits and v its low 16. A Philox call costs about 70 integer instructions;
// one per element would outweigh the element's 20 bytes of traffic on a GPU
// (an H200 issues about 17 T integer instructions/s against 4.8 TB/s), and
// on the CPU twin it took 40% of the step. The CPU twin draws the bits of a
// block of elements before stepping them, so that its element loop vectorises.
// Nothing in the key depends on the rank or the sharding: the flat layout of
// a compute dtype places every parameter element at the same index at every
// world size (only the padding at its end changes, Note [Flat parameter
// layout]), so zero1 shard r of N elements draws for its element i exactly
// what any other sharding draws for flat element r*N + i. Whatever
// splits the shard (threads, 16-byte packs, disk-offload chunks) passes the
// index on, so the bits are the same at every world size where f32 moments
// are, on the CPU twin and on CUDA alike, and a resumed run draws what the
// uninterrupted one drew (t is saved with the checkpoint).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "zrt/kernels/hd.h"
#include "zrt/kernels/ops/cast_math.h"
#include "zrt/kernels/ops/random_fill_math.h"
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

// The key of the stochastic rounding of bf16 moments (Note [bf16 AdamW
// moments]); unused with f32 moments.
struct MomentRoundingKey {
  std::uint32_t seed_lo = 0, seed_hi = 0;
  std::uint32_t step = 0;         // t mod 2^32
  std::uint32_t stream = 0;       // the unit's stream id, folded
  std::uint64_t first_index = 0;  // flat index of element 0 of the arrays

  // The random bits of flat elements 4q .. 4q + 3.
  ZRT_HD PhiloxWords words(std::uint64_t q) const {
    return philox4x32_10(static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(q >> 32), step,
                         stream, seed_lo, seed_hi);
  }
};

// The 32 random bits of each element of a run walked in increasing order:
// one Philox call per four flat indices, kept until the walk leaves them.
// The word is chosen by selects, not by indexing, so that on the device the
// words stay in registers.
class MomentNoise {
 public:
  ZRT_HD explicit MomentNoise(const MomentRoundingKey& key) : key_(key) {}
  // The bits of element i of the arrays (flat index first_index + i).
  ZRT_HD std::uint32_t at(std::int64_t i) {
    const std::uint64_t j = key_.first_index + static_cast<std::uint64_t>(i);
    if ((j >> 2) != counter_) {
      counter_ = j >> 2;
      words_ = key_.words(counter_);
    }
    const unsigned k = static_cast<unsigned>(j & 3);
    return k == 0 ? words_.x[0] : k == 1 ? words_.x[1] : k == 2 ? words_.x[2] : words_.x[3];
  }

 private:
  MomentRoundingKey key_;
  std::uint64_t counter_ = ~std::uint64_t{0};  // no counter of a flat index (j < 2^63)
  PhiloxWords words_{};
};

// Whether moments of type M are rounded with random bits.
template <class M>
inline constexpr bool kRoundedMoments = std::is_same_v<M, bf16>;

// Stores the new moments of an element: as they are (f32), or rounded
// stochastically to bf16 with the element's 32 bits.
ZRT_HD inline void store_moments(float& m, float& v, float mi, float vi, std::uint32_t) {
  m = mi;
  v = vi;
}
ZRT_HD inline void store_moments(bf16& m, bf16& v, float mi, float vi, std::uint32_t bits) {
  m = {f32_to_bf16_with_noise(mi, bits >> 16)};
  v = {f32_to_bf16_with_noise(vi, bits & 0xffffu)};
}

// The low-precision copy of the updated parameter is optional; NoParamOut
// stands for "not written".
struct NoParamOut {};

// Steps element i of a shard (param p, moments m and v of type M, f32 or
// bf16, gradient g) in place and writes the updated parameter to out[i]
// unless L is NoParamOut, `bits` being its rounding bits (MomentNoise) with
// bf16 moments: the loop body of the CUDA kernel and of the CPU twin.
template <class G, class L, class M>
ZRT_HD inline void adamw_element_at(float* p, M* m, M* v, const G* g, L* out, std::int64_t i,
                                    float decay, const AdamWCoefficients& c, std::uint32_t bits) {
  float pi = p[i], mi = to_f32(m[i]), vi = to_f32(v[i]);
  adamw_element(pi, mi, vi, g[i], decay, c);
  p[i] = pi;
  store_moments(m[i], v[i], mi, vi, bits);
  if constexpr (!std::is_same_v<L, NoParamOut>) out[i] = from_f32<L>(pi);
}

}  // namespace zrt::kernels
