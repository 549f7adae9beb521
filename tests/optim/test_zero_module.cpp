// ZeroModule's own contract, on 2 local ranks: step() refuses gradients that
// no backward scope synced (Note [ZeroModule steps on synced gradients]) and
// steps on the ones that were.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <random>

#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;

namespace {

// Parameters of odd sizes, one smaller than the world.
std::vector<std::pair<std::string, Tensor>> unit_params(std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::vector<double> w(15), b(1);
  for (auto& x : w) x = normal(rng);
  for (auto& x : b) x = normal(rng);
  return {{"weight", Tensor::from_doubles(w, DType::f32, Device::cpu(), {3, 5})},
          {"bias", Tensor::from_doubles(b, DType::f32)}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zero_module)

BOOST_AUTO_TEST_CASE(step_needs_synced_gradients) {
  const unsigned seed = std::random_device{}();
  std::printf("zero_module/step_needs_synced_gradients seed %u\n", seed);
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);  // the same initial values on every rank
    optim::ZeroModule module(world);
    const auto unit = module.add_unit("fc", unit_params(rng));
    BOOST_CHECK_THROW(module.step(1e-3), InvalidState);  // no backward at all

    // Rank r writes (r + 1) * g; the average over the 2 ranks is 1.5 * g.
    std::normal_distribution<double> normal;
    std::vector<double> g(16);
    double sq = 0;
    for (auto& x : g) {
      x = normal(rng);
      sq += x * x;
    }
    auto write_grads = [&](optim::ZeroModule::Scope& scope) {
      Tensor w = scope.grad("weight"), b = scope.grad("bias");
      for (int i = 0; i < 15; ++i) w.data<float>()[i] += static_cast<float>((world->rank() + 1) * g[i]);
      b.data<float>()[0] += static_cast<float>((world->rank() + 1) * g[15]);
    };
    {
      auto scope = module.backward(unit, /*sync=*/false);
      write_grads(scope);
    }
    BOOST_CHECK_THROW(module.step(1e-3), InvalidState);  // accumulated, never synced
    {
      auto scope = module.backward(unit, /*sync=*/true);
      write_grads(scope);
    }
    const auto result = module.step(1e-3);
    // Two micro-batches of 1.5 * g each.
    BOOST_TEST(result.grad_norm == 3.0 * std::sqrt(sq), boost::test_tools::tolerance(1e-5));
    BOOST_CHECK_THROW(module.step(1e-3), InvalidState);  // nothing synced since
  });
}

BOOST_AUTO_TEST_SUITE_END()
