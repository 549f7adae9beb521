// AdamW in float64 (torch.optim.AdamW's formula) and the helpers the AdamW
// tests share: random weight-decay ranges and a tolerance check.
#pragma once

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "zrt/kernels/ops/adamw.h"

namespace zrt::test {

struct AdamWReference {
  std::vector<double> p, m, v;

  void step(const std::vector<double>& grad, std::int64_t t, const kernels::AdamWHyperparams& hp,
            const std::vector<kernels::ElementRange>& decay_ranges, double grad_scale = 1.0) {
    std::vector<bool> decays(p.size(), false);
    for (auto r : decay_ranges)
      for (std::int64_t i = r.begin; i < r.end; ++i) decays[static_cast<std::size_t>(i)] = true;
    const double bc1 = 1 - std::pow(hp.beta1, double(t)), bc2 = 1 - std::pow(hp.beta2, double(t));
    for (std::size_t i = 0; i < p.size(); ++i) {
      const double g = grad[i] * double(static_cast<float>(grad_scale));
      if (decays[i]) p[i] *= 1 - hp.lr * hp.weight_decay;
      m[i] = hp.beta1 * m[i] + (1 - hp.beta1) * g;
      v[i] = hp.beta2 * v[i] + (1 - hp.beta2) * g * g;
      p[i] -= hp.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + hp.eps);
    }
  }
};

// Sorted disjoint ranges covering roughly half of [0, n), some empty.
inline std::vector<kernels::ElementRange> random_decay_ranges(std::int64_t n,
                                                              std::mt19937_64& gen) {
  std::vector<kernels::ElementRange> ranges;
  std::uniform_int_distribution<std::int64_t> step(0, std::max<std::int64_t>(n / 4, 1));
  for (std::int64_t pos = 0; pos < n;) {
    const std::int64_t begin = std::min(n, pos + step(gen));
    const std::int64_t end = std::min(n, begin + step(gen));
    ranges.push_back({begin, end});
    pos = end + 1;
  }
  return ranges;
}

// |got - want| <= rtol * max(|want|, mean |want|): relative to the element,
// or to the buffer's scale where the element is near zero by cancellation.
// Relative error against max(|want|, mean |want|, scale): `scale` is the size
// of the terms a value is summed from, which bounds its rounding error even
// when they cancel (a single element's m can land near zero).
inline void check_close(const std::vector<double>& got, const std::vector<double>& want,
                        double rtol, const char* what, double scale = 0) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  double mean = 0;
  for (double w : want) mean += std::fabs(w);
  mean /= double(std::max<std::size_t>(want.size(), 1));
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - want[i]) / std::max({std::fabs(want[i]), mean, scale});
    if (!(err <= rtol)) BOOST_FAIL(what << "[" << i << "] = " << got[i] << ", want " << want[i]);
    worst = std::max(worst, err);
  }
  BOOST_TEST_MESSAGE(what << ": worst relative error " << worst);
}

}  // namespace zrt::test
