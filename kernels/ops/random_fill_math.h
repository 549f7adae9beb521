// Per-element arithmetic of random_fill, shared by the CUDA kernel and the
// CPU twin: a counter-based generator and the two distributions parameters
// are drawn from.
//
// Note [Counter-based parameter init]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Element i of the parameter whose stream id is s, under seed k, is a
// function of (k, s, i) alone: Philox4x32-10 (Salmon et al. 2011, as cuRAND
// and PyTorch use it) with key (k mod 2^32, k >> 32) and counter
// (i mod 2^32, i >> 32, s mod 2^32, s >> 32) gives four words x0..x3, and
//   uniform(lo, hi):  lo + (hi - lo) · u,  u = ((x1·2^32 + x0) >> 11) · 2^-53
//   normal(mean, std): mean + std · sqrt(-2 ln(1 - u)) · cos(2π v),
//                      v the same of (x3, x2)
// evaluated in double and rounded once to f32. So any slice of any
// parameter is drawn alone, in parallel, where it lives: each rank fills
// only its own shards, and the same seed gives the same weights at every
// world size, strategy and device. ln and cos are zrt's own polynomials of
// IEEE operations (no libm, whose last bits differ between glibc and CUDA),
// and ops/ compiles without FMA contraction on both sides (Note [Two
// precision rules]), so a CUDA draw equals its CPU twin's bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "zrt/kernels/hd.h"

namespace zrt::kernels {

struct RandomInit {
  enum class Kind : std::uint8_t { normal, uniform };
  Kind kind = Kind::normal;
  double a = 0;  // normal: mean; uniform: lo
  double b = 1;  // normal: std;  uniform: hi
};

struct PhiloxWords {
  std::uint32_t x[4];
};

// Philox4x32-10 of one counter under one key.
ZRT_HD inline PhiloxWords philox4x32_10(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                                        std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
  }
  return {{c0, c1, c2, c3}};
}

// 53 random bits of (hi, lo) as a double in [0, 1).
ZRT_HD inline double uniform53(std::uint32_t hi, std::uint32_t lo) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// ln x for x in [2^-53, 1]: x = m · 2^e with m in (√½, √2], then
// ln m = 2 atanh(s), s = (m - 1)/(m + 1), |s| < 0.172, by its series to s^23.
ZRT_HD inline double init_log(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
  double m;
  std::memcpy(&m, &bits, sizeof m);
  if (m > 1.4142135623730951) {
    m = m * 0.5;
    e = e + 1;
  }
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double poly = 1.0 / 23.0;
  for (int k = 21; k >= 1; k -= 2) poly = 1.0 / k + s2 * poly;
  return static_cast<double>(e) * 0.6931471805599453 + 2.0 * s * poly;
}

// cos 2πv for v in [0, 1): the quadrant from 4v, then the Taylor series of
// cos and sin on [0, π/2) to the 20th power.
ZRT_HD inline double init_cos_2pi(double v) {
  const double t = v * 4.0;
  const int quadrant = static_cast<int>(t);
  const double th = (t - quadrant) * 1.5707963267948966;
  const double th2 = th * th;
  double c = 1.0, s = 1.0;
  for (int k = 20; k >= 2; k -= 2) c = 1.0 - th2 / (k * (k - 1)) * c;
  for (int k = 19; k >= 3; k -= 2) s = 1.0 - th2 / (k * (k - 1)) * s;
  s = th * s;
  switch (quadrant) {
    case 0:
      return c;
    case 1:
      return -s;
    case 2:
      return -c;
    default:
      return s;
  }
}

// Element `index` of stream `stream` under `seed` (Note [Counter-based parameter init]).
ZRT_HD inline float random_init_element(const RandomInit& r, std::uint64_t seed,
                                        std::uint64_t stream, std::uint64_t index) {
  const PhiloxWords w =
      philox4x32_10(static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                    static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32),
                    static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  const double u = uniform53(w.x[1], w.x[0]);
  if (r.kind == RandomInit::Kind::uniform) return static_cast<float>(r.a + (r.b - r.a) * u);
  const double v = uniform53(w.x[3], w.x[2]);
  const double radius = sqrt(-2.0 * init_log(1.0 - u));
  return static_cast<float>(r.a + r.b * (radius * init_cos_2pi(v)));
}

}  // namespace zrt::kernels
