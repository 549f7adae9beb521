// ZeroModule's own contract, on 2 local ranks: step() refuses gradients that
// no backward scope synced (Note [ZeroModule steps on synced gradients]) and
// steps on the ones that were.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <random>

#include "tests/support/rank_check.h"
#include "tests/support/test_seed.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;

namespace {

// On rank threads (Boost.Test's checks are not thread-safe): `call` must
// throw InvalidState.
template <class F>
void expect_invalid_state(F&& call, const char* what) {
  bool threw = false;
  try {
    call();
  } catch (const InvalidState&) {
    threw = true;
  }
  ZRT_EXPECT(threw, "expected InvalidState: ", what);
}

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
  const auto seed = test::test_seed("zero_module/step_needs_synced_gradients");
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);  // the same initial values on every rank
    optim::ZeroModule module(world);
    const auto unit = module.add_unit("fc", unit_params(rng));
    expect_invalid_state([&] { module.step(1e-3); }, "step with no backward");

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
      for (int i = 0; i < 15; ++i)
        w.data<float>()[i] += static_cast<float>((world->rank() + 1) * g[i]);
      b.data<float>()[0] += static_cast<float>((world->rank() + 1) * g[15]);
    };
    {
      auto scope = module.backward(unit, /*sync=*/false);
      write_grads(scope);
    }
    expect_invalid_state([&] { module.step(1e-3); },
                         "step after backward scopes that never synced");
    {
      auto scope = module.backward(unit, /*sync=*/true);
      write_grads(scope);
    }
    const auto result = module.step(1e-3);
    // Two micro-batches of 1.5 * g each.
    const double expected = 3.0 * std::sqrt(sq);
    ZRT_EXPECT(std::abs(result.grad_norm - expected) <= 1e-5 * expected, "grad norm ",
               result.grad_norm, ", expected ", expected);
    expect_invalid_state([&] { module.step(1e-3); },
                         "a second step with nothing synced since the first");
  });
}

// By-name lookup outside a scope agrees with full_params() and the scopes'
// names, across units, for a tied second name too.
BOOST_AUTO_TEST_CASE(finds_parameters_by_name) {
  const auto seed = test::test_seed("zero_module/finds_parameters_by_name");
  run_local_ranks(3, [&](const CommPtr& world) {
    std::mt19937 rng(seed);
    optim::ZeroModule module(world);
    const auto first = module.add_unit("fc1", unit_params(rng));
    auto second_params = unit_params(rng);
    const Tensor shared = second_params[0].second;
    second_params.push_back({"weight_tied", shared});
    const auto second = module.add_unit("fc2", second_params);

    const auto all = module.full_params();
    for (const auto& [name, value] : all) {
      const auto at = module.find_param(name);
      ZRT_EXPECT(at.has_value(), "find_param misses ", name);
      ZRT_EXPECT(module.handle(at->unit).fqn(at->index) == name, "find_param(", name,
                 ") points at ", module.handle(at->unit).fqn(at->index));
      ZRT_EXPECT(module.full_param(name).to_doubles() == value.to_doubles(), "full_param(", name,
                 ") differs from full_params()");
    }
    ZRT_EXPECT(module.find_param("fc1.weight")->unit == first &&
                   module.find_param("fc2.bias")->unit == second,
               "a name found in the wrong unit");
    const auto tied = module.find_param("fc2.weight_tied");
    ZRT_EXPECT(
        tied && tied->unit == second && module.handle(second).fqn(tied->index) == "fc2.weight",
        "the tied name does not find its primary");
    {
      auto scope = module.forward(second);
      ZRT_EXPECT(scope.param("weight").to_doubles() == all.at("fc2.weight").to_doubles() &&
                     scope.param("fc2.weight").to_doubles() == all.at("fc2.weight").to_doubles(),
                 "a scope's short and full names disagree with full_params()");
    }
    ZRT_EXPECT(!module.find_param("weight") && !module.find_param("fc3.weight"),
               "found a name no unit has");
    bool threw = false;
    try {
      module.full_param("fc3.weight");
    } catch (const InvalidArgument& e) {
      threw = std::string(e.what()).find("fc3.weight") != std::string::npos;
    }
    ZRT_EXPECT(threw, "full_param of an unknown name did not throw InvalidArgument naming it");
  });
}

BOOST_AUTO_TEST_CASE(a_tie_across_units_stays_one_parameter) {
  // Copying each unit's parameters would give the two uses two masters and
  // two gradients: the tie would break without a word. The later unit uses
  // the earlier one's parameter instead (tests/optim/test_tied_across_units.cpp
  // trains through it).
  std::mt19937 rng(7);
  auto params = unit_params(rng);
  run_local_ranks(2, [&](const CommPtr& world) {
    optim::ZeroModule module(world);
    const auto embed = module.add_unit("embed", params);
    std::mt19937 mine(11);  // the same on every rank
    auto head_params = unit_params(mine);
    head_params.push_back({"tied", params[0].second});
    const auto head = module.add_unit("head", head_params);
    const auto all = module.full_params();
    ZRT_EXPECT(all.size() == 4 && !all.count("head.tied"), "the tied weight is not held once");
    const auto at = module.find_param("head.tied");
    ZRT_EXPECT(at && at->unit == embed && module.handle(embed).fqn(at->index) == "embed.weight",
               "the tied name does not find the owner's parameter");
    auto scope = module.forward(head);
    ZRT_EXPECT(scope.param("tied").to_doubles() == all.at("embed.weight").to_doubles(),
               "the head's scope does not see the owner's parameter");
  });
}

BOOST_AUTO_TEST_SUITE_END()
