// Fused AdamW with bf16 moments (Note [bf16 AdamW moments]) against a float64
// reference of the same step and the same stochastic rounding: each stored
// moment is one of the two bf16 neighbours of the reference, the upper one
// exactly when the element's Philox bits say so, the rounding is unbiased,
// and the bits depend on the flat index, never on how the shard is split.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/ops/adamw_reference.h"
#include "zrt/kernels/ops/adamw.h"
#include "zrt/kernels/ops/random_fill_math.h"

using namespace zrt;
using namespace zrt::test;
using kernels::AdamWHyperparams;
using kernels::AdamWRounding;
using kernels::ElementRange;

namespace {

constexpr double kParamRtol = 4e-6;
const AdamWHyperparams kHp{
    .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};

// The bf16 values either side of x, toward zero first (stochastic rounding
// truncates the magnitude); lo == hi when x is a bf16 value.
struct Neighbours {
  double lo, hi, fraction;  // fraction of the way from lo to hi, in [0, 1)
};
Neighbours bf16_neighbours(double x) {
  if (x == 0) return {0, 0, 0};
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = f * 2^e, f in [0.5, 1)
  const double ulp = std::ldexp(1.0, e - 8);
  const double lo = std::trunc(std::fabs(x) / ulp) * ulp;
  const double q = (std::fabs(x) - lo) / ulp;
  return {std::copysign(lo, x), std::copysign(q == 0 ? lo : lo + ulp, x), q};
}

// The 16 random bits of moment `which` (0: m, 1: v) of flat element j
// (Note [bf16 AdamW moments]), written from the Note.
std::uint32_t noise_of(const AdamWRounding& r, std::int64_t step, std::uint64_t j, int which) {
  const std::uint64_t q = j / 4;
  const kernels::PhiloxWords w =
      kernels::philox4x32_10(std::uint32_t(q), std::uint32_t(q >> 32), std::uint32_t(step),
                             std::uint32_t(r.stream) ^ std::uint32_t(r.stream >> 32),
                             std::uint32_t(r.seed), std::uint32_t(r.seed >> 32));
  const std::uint32_t word = w.x[j % 4];
  return which == 0 ? word >> 16 : word & 0xffffu;
}

// Checks one stored moment against the float64 value x, which the kernel's
// f32 arithmetic misses by at most `delta` (a few f32 ulps of the terms it
// sums: where they cancel, far more than a bf16 ulp of x): within one bf16
// spacing of x, and where x ± delta share their bf16 neighbours, the upper one
// exactly when noise + the dropped bits carry (near that boundary the f32
// rounding of x decides, and either passes). Returns whether the element's
// decision was checked.
bool check_rounding(double got, double x, double delta, std::uint32_t noise, const char* what,
                    std::int64_t i) {
  const Neighbours nb = bf16_neighbours(x), below = bf16_neighbours(x - delta),
                   above = bf16_neighbours(x + delta);
  const double spacing = std::max(std::fabs(above.hi - above.lo), std::fabs(below.hi - below.lo));
  if (!(std::fabs(got - x) <= std::max(spacing, std::fabs(nb.hi - nb.lo)) + delta))
    BOOST_FAIL(what << "[" << i << "] = " << got << " is not a bf16 neighbour of " << x << " ("
                    << nb.lo << ", " << nb.hi << ")");
  if (below.lo != above.lo || below.hi != above.hi || nb.hi == nb.lo) return false;
  const double carry = double(noise) + nb.fraction * 65536.0 - 65536.0;
  if (std::fabs(carry) <= 2 + delta / std::fabs(nb.hi - nb.lo) * 65536.0) return false;
  const double want = carry >= 0 ? nb.hi : nb.lo;
  if (got != want)
    BOOST_FAIL(what << "[" << i << "] = " << got << ", the rounding with noise " << noise
                    << " gives " << want << " (reference " << x << ")");
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernels_adamw_bf16_moments)

BOOST_AUTO_TEST_CASE(each_moment_is_the_keyed_rounding_of_the_float64_reference) {
  auto gen = fresh_generator();
  const AdamWRounding rounding{.seed = gen(), .stream = gen(), .first_index = 123457};
  for (std::int64_t n :
       {std::int64_t(1), std::int64_t(3), std::int64_t(4097), std::int64_t(65537)}) {
    for (DType gt : {DType::f32, DType::bf16}) {
      const std::vector<ElementRange> ranges = random_decay_ranges(n, gen);
      Tensor p = random_tensor(n, DType::f32, gen, -1, 1);
      Tensor m = random_tensor(n, DType::bf16, gen, -0.1, 0.1);
      Tensor v = random_tensor(n, DType::bf16, gen, 1e-4, 0.01);
      Tensor g = random_tensor(n, gt, gen, -1, 1);
      const std::int64_t step = 5;
      AdamWReference ref{p.to_doubles(), m.to_doubles(), v.to_doubles()};
      // The size of the terms each new moment sums (f32 error bound below).
      const std::vector<double> gd = g.to_doubles();
      std::vector<double> m_terms(static_cast<std::size_t>(n)),
          v_terms(static_cast<std::size_t>(n));
      for (std::size_t i = 0; i < std::size_t(n); ++i) {
        const double gs = 0.5 * gd[i];
        m_terms[i] = kHp.beta1 * std::fabs(ref.m[i]) + (1 - kHp.beta1) * std::fabs(gs);
        v_terms[i] = kHp.beta2 * ref.v[i] + (1 - kHp.beta2) * gs * gs;
      }
      ref.step(gd, step, kHp, ranges, 0.5);
      kernels::fused_adamw(p, m, v, g, step, kHp, ranges,
                           {.grad_scale = 0.5, .param_out = std::nullopt, .rounding = rounding});
      BOOST_TEST_CONTEXT("n=" << n << " grad " << dtype_name(gt)) {
        // The update used m and v before their rounding.
        check_close(p.to_doubles(), ref.p, kParamRtol, "param");
        const std::vector<double> gm = m.to_doubles(), gv = v.to_doubles();
        std::int64_t decided = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const std::uint64_t j = std::uint64_t(rounding.first_index + i);
          decided += check_rounding(gm[i], ref.m[i], 0x1p-22 * m_terms[i],
                                    noise_of(rounding, step, j, 0), "exp_avg", i);
          decided += check_rounding(gv[i], ref.v[i], 0x1p-22 * v_terms[i],
                                    noise_of(rounding, step, j, 1), "exp_avg_sq", i);
        }
        // About 94% lie far enough from a boundary for the float64 reference to decide.
        BOOST_TEST(decided >= 2 * n * 8 / 10 - 2, decided << " of " << 2 * n << " decided");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(rounding_is_unbiased) {
  // Every element steps the same moments with the same gradient, so each
  // holds the same f32 result x, rounded with its own bits: the mean of the
  // stored values is x within its sampling error.
  auto gen = fresh_generator();
  const std::int64_t n = 1 << 17;
  std::uniform_real_distribution<double> grad(-1, 1);
  for (int trial = 0; trial < 6; ++trial) {
    const double g0 = grad(gen);
    const double m0 = round_to_bf16(0.1 * grad(gen)), v0 = round_to_bf16(0.004 + 0.001 * trial);
    Tensor p = Tensor::full({n}, 0.5, DType::f32), m = Tensor::full({n}, m0, DType::bf16),
           v = Tensor::full({n}, v0, DType::bf16), g = Tensor::full({n}, g0, DType::f32);
    const std::int64_t step = 1 + trial;
    kernels::fused_adamw(
        p, m, v, g, step, kHp, {},
        {.param_out = std::nullopt, .rounding = {.seed = gen(), .stream = 7, .first_index = 0}});
    // x as the kernel computes it (f32, Note [AdamW order of operations]).
    const float gf = float(g0);
    const float mx = float(m0) * float(kHp.beta1) + float(1.0 - kHp.beta1) * gf;
    const float vx = float(v0) * float(kHp.beta2) + (float(1.0 - kHp.beta2) * gf) * gf;
    for (auto [t, x, what] :
         {std::tuple{&m, double(mx), "exp_avg"}, std::tuple{&v, double(vx), "exp_avg_sq"}}) {
      const Neighbours nb = bf16_neighbours(x);
      const std::vector<double> got = t->to_doubles();
      double sum = 0;
      for (double y : got) sum += y;
      const double mean = sum / double(n), ulp = std::fabs(nb.hi - nb.lo);
      const double sigma = ulp * std::sqrt(nb.fraction * (1 - nb.fraction) / double(n));
      BOOST_TEST_MESSAGE(what << ": x " << x << ", mean " << mean << ", fraction " << nb.fraction
                              << ", " << (mean - x) / std::max(sigma, 1e-300) << " sigma");
      BOOST_TEST(std::fabs(mean - x) <= 5 * sigma + 1e-12 * std::fabs(x),
                 what << " trial " << trial << ": mean " << mean << " vs " << x << " (sigma "
                      << sigma << ")");
      // Round to nearest would put every element on one side: both occur.
      if (nb.fraction > 0.01 && nb.fraction < 0.99) {
        std::int64_t up = 0;
        for (double y : got) up += y == nb.hi;
        BOOST_TEST((up > 0 && up < n), what << ": " << up << " of " << n << " rounded up");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(split_shards_draw_the_same_bits) {
  // A shard updated whole, or as pieces that carry their flat index (other
  // shardings, threads, disk-offload chunks), stores the same bits.
  auto gen = fresh_generator();
  const std::int64_t n = 20011, first = 9973;
  const AdamWRounding rounding{.seed = gen(), .stream = gen(), .first_index = first};
  const std::vector<ElementRange> ranges = random_decay_ranges(n, gen);
  const Tensor p = random_tensor(n, DType::f32, gen, -1, 1),
               m = random_tensor(n, DType::bf16, gen, -0.1, 0.1),
               v = random_tensor(n, DType::bf16, gen, 0, 0.01),
               g = random_tensor(n, DType::bf16, gen, -1, 1);
  const Tensor pw = p.clone(), mw = m.clone(), vw = v.clone();
  kernels::fused_adamw(pw, mw, vw, g, 3, kHp, ranges,
                       {.param_out = std::nullopt, .rounding = rounding});
  for (std::int64_t cut : {std::int64_t(1), std::int64_t(4), std::int64_t(4099), n - 1}) {
    const Tensor ps = p.clone(), ms = m.clone(), vs = v.clone();
    for (auto [b, e] : {std::pair{std::int64_t(0), cut}, std::pair{cut, n}}) {
      std::vector<ElementRange> piece;
      for (ElementRange r : ranges)
        if (std::max(r.begin, b) < std::min(r.end, e))
          piece.push_back({std::max(r.begin, b) - b, std::min(r.end, e) - b});
      AdamWRounding at = rounding;
      at.first_index += b;
      kernels::fused_adamw(ps.slice(b, e - b), ms.slice(b, e - b), vs.slice(b, e - b),
                           g.slice(b, e - b), 3, kHp, piece,
                           {.param_out = std::nullopt, .rounding = at});
    }
    BOOST_TEST_CONTEXT("cut at " << cut) {
      BOOST_TEST((bytes_of(ps) == bytes_of(pw)));
      BOOST_TEST((bytes_of(ms) == bytes_of(mw)));
      BOOST_TEST((bytes_of(vs) == bytes_of(vw)));
    }
  }
  // Another seed, step or stream draws other bits.
  for (int change = 0; change < 3; ++change) {
    AdamWRounding other = rounding;
    std::int64_t step = 3;
    if (change == 0) other.seed ^= 1;
    if (change == 1) step = 4;
    if (change == 2) other.stream ^= 1ull << 40;
    const Tensor po = p.clone(), mo = m.clone(), vo = v.clone();
    kernels::fused_adamw(po, mo, vo, g, step, kHp, ranges,
                         {.param_out = std::nullopt, .rounding = other});
    BOOST_TEST((bytes_of(mo) != bytes_of(mw)), "change " << change);
  }
}

BOOST_AUTO_TEST_CASE(bad_moment_dtypes_throw) {
  const std::int64_t n = 8;
  const Tensor p = Tensor::zeros({n}, DType::f32), g = Tensor::zeros({n}, DType::f32);
  const Tensor b = Tensor::zeros({n}, DType::bf16), f = Tensor::zeros({n}, DType::f32),
               h = Tensor::zeros({n}, DType::f16);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, b, f, g, 1, kHp, {}), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(p, h, h, g, 1, kHp, {}), InvalidArgument);
  BOOST_CHECK_THROW(kernels::fused_adamw(b, b, b, g, 1, kHp, {}), InvalidArgument);
  BOOST_CHECK_THROW(
      kernels::fused_adamw(p, b, b, g, 1, kHp, {},
                           {.param_out = std::nullopt, .rounding = {.first_index = -1}}),
      InvalidArgument);
  // m and v in one buffer would be written over each other.
  BOOST_CHECK_THROW(kernels::fused_adamw(p, b, b, g, 1, kHp, {}), InvalidArgument);
  BOOST_CHECK_NO_THROW(kernels::fused_adamw(p, b, Tensor::zeros({n}, DType::bf16), g, 1, kHp, {}));
}

BOOST_AUTO_TEST_SUITE_END()
