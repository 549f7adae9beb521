#include "tests/optim/full_param_mismatch_check.h"

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/rank_check.h"
#include "zrt/optim/zero_module.h"

namespace zrt::testing {

void check_full_param_mismatch_is_named(const CommPtr& world, std::uint64_t seed) {
  ZRT_EXPECT(world->size() >= 2, "the mismatch needs two ranks");
  std::mt19937_64 rng(seed);  // the same values on every rank
  std::normal_distribution<double> normal;
  // fc1 holds more elements than fc0, so the two units' gathers differ.
  const std::int64_t cols = 2 * static_cast<std::int64_t>(rng() % 8) + 1;
  std::map<std::string, std::vector<double>> initial;
  auto params = [&](const std::string& unit, std::int64_t rows, std::int64_t c) {
    std::vector<double> w(static_cast<std::size_t>(rows * c)), b(1);
    for (auto& x : w) x = static_cast<float>(normal(rng));
    b[0] = static_cast<float>(normal(rng));
    initial[unit + ".weight"] = w;
    initial[unit + ".bias"] = b;
    return std::vector<std::pair<std::string, Tensor>>{
        {"weight", Tensor::from_doubles(w, DType::f32, Device::cpu(), {rows, c})},
        {"bias", Tensor::from_doubles(b, DType::f32)}};
  };
  optim::ZeroModule module(world);
  module.add_unit("fc0", params("fc0", 3, cols));
  module.add_unit("fc1", params("fc1", 5, cols + 2));
  // Two units of one shape: gathers of equal size, told apart by name.
  module.add_unit("fc2", params("fc2", 3, cols));
  module.add_unit("fc3", params("fc3", 3, cols));
  try {
    if (world->rank() == 0)
      module.full_param("fc1.weight");
    else
      module.full_params();
    ZRT_EXPECT(false, "rank ", world->rank(), ": the mismatched gathers returned");
  } catch (const CommError& e) {
    const std::string m = e.what();
    ZRT_EXPECT(m.find("does not match across ranks") != std::string::npos &&
                   m.find("rank 0 issued all_gather of ") != std::string::npos &&
                   m.find(" in full_param('fc1.weight')") != std::string::npos &&
                   m.find(" issued all_gather of ") != std::string::npos &&
                   m.find(" in full_params()") != std::string::npos,
               "rank ", world->rank(), ": the error does not name both calls: ", m);
  }
  try {
    module.full_param(world->rank() == 0 ? "fc2.weight" : "fc3.weight");
    ZRT_EXPECT(false, "rank ", world->rank(), ": gathers of two units of one size returned");
  } catch (const CommError& e) {
    const std::string m = e.what();
    ZRT_EXPECT(m.find("does not match across ranks") != std::string::npos &&
                   m.find(" of 'fc2' in full_param('fc2.weight')") != std::string::npos &&
                   m.find(" of 'fc3' in full_param('fc3.weight')") != std::string::npos,
               "rank ", world->rank(), ": the error does not name both units: ", m);
  }
  // Nothing moved: the module goes on and gives the values it was built from.
  const auto after = module.full_params();
  ZRT_EXPECT(after.size() == initial.size(), "full_params() has ", after.size(), " parameters");
  for (const auto& [name, values] : initial)
    ZRT_EXPECT(after.count(name) && after.at(name).to_doubles() == values, "rank ", world->rank(),
               ": ", name, " changed after the mismatch");
}

}  // namespace zrt::testing
