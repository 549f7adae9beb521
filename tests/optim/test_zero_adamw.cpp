// ZeroAdamW on the local backend (ranks as threads, 1-4 ranks, several
// strategies) against single-process torch.optim.AdamW, plus skip limits,
// decay ranges and argument/state errors.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>

#include "tests/optim/zero_adamw_checks.h"
#include "tests/support/rank_check.h"
#include "zrt/optim/flat_param/sharding_groups.h"
#include "zrt/optim/zero_adamw.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
namespace fs = std::filesystem;

namespace {

struct Case {
  optim::ShardingStrategy strategy;
  int world;
  int zero3;
};

const Case kCases[] = {
    {optim::ShardingStrategy::full_shard, 1, 1}, {optim::ShardingStrategy::full_shard, 2, 2},
    {optim::ShardingStrategy::no_shard, 2, 1},   {optim::ShardingStrategy::hybrid_shard, 2, 1},
    {optim::ShardingStrategy::full_shard, 3, 3}, {optim::ShardingStrategy::layer_zero, 3, 1},
    {optim::ShardingStrategy::full_shard, 4, 4}, {optim::ShardingStrategy::hybrid_shard, 4, 2},
    {optim::ShardingStrategy::layer_zero, 4, 2}, {optim::ShardingStrategy::no_shard, 4, 1},
};

void on_ranks(int n, const std::string& what, const std::function<void(const CommPtr&)>& fn) {
  try {
    run_local_ranks(n, fn, std::chrono::seconds(30));
  } catch (const std::exception& e) {
    BOOST_ERROR(what << " on " << n << " ranks: " << e.what());
  }
}

std::string describe(const Case& c) {
  return std::string(optim::strategy_name(c.strategy)) + " zero3=" + std::to_string(c.zero3);
}

std::vector<optim::NamedParam> small_params() {
  return {{"fc", "weight",
           Tensor::from_doubles({0.5, -1, 2, 0.25, 3, -0.75}, DType::f32, Device::cpu(), {2, 3})},
          {"fc", "bias", Tensor::from_doubles({0.1, -0.2}, DType::f32)},
          {"ln", "weight", Tensor::from_doubles({1, 1.5, 0.5, 2, -1}, DType::f32)},
          {"proj", "weight",
           Tensor::from_doubles({0.3, 0.6, -0.9, 1.2}, DType::f32, Device::cpu(), {4, 1})}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zero_adamw)

BOOST_AUTO_TEST_CASE(matches_torch_adamw_with_clipping_skips_and_loss_scale) {
  const std::uint64_t seed = std::random_device{}();
  BOOST_TEST_MESSAGE("random seed " << seed);
  const testing::AdamWScenario s = testing::make_adamw_scenario(seed);
  const fs::path dir = fs::temp_directory_path() / ("zrt_zero_adamw_" + std::to_string(getpid()) +
                                                    "_" + std::to_string(seed % 1000000));
  fs::create_directories(dir);
  testing::AdamWExpected expected;
  try {
    testing::run_torch_reference(s, dir);
    expected = testing::read_torch_reference(s, dir);
  } catch (const std::exception& e) {
    fs::remove_all(dir);
    BOOST_FAIL(e.what());
  }
  fs::remove_all(dir);
  for (const Case& c : kCases)
    on_ranks(c.world, describe(c), [&](const CommPtr& world) {
      testing::check_zero_adamw(world, c.strategy, c.zero3, s, expected);
    });
}

BOOST_AUTO_TEST_CASE(consecutive_skips_throw_on_every_rank) {
  for (const Case& c : {kCases[1], kCases[7]})
    on_ranks(c.world, describe(c),
             [&](const CommPtr& world) { testing::check_skip_limit(world, c.strategy, c.zero3); });
}

// Note [Ranks agree on each step's settings], in every kind of group: a
// zero1 group (full), replicas only (no_shard), both (hybrid, layer-zero).
BOOST_AUTO_TEST_CASE(ranks_stepping_with_different_settings_all_fail) {
  for (const Case& c : {kCases[1], kCases[2], kCases[4], kCases[7], kCases[8]})
    on_ranks(c.world, describe(c), [&](const CommPtr& world) {
      testing::check_settings_agree(world, c.strategy, c.zero3);
    });
}

BOOST_AUTO_TEST_CASE(bf16_moments_are_bit_identical_at_every_world_size) {
  // Note [bf16 AdamW moments]: the rounding keys on flat indices, so every
  // sharding of 1 to 4 ranks, and the moments in host memory or on disk in
  // chunks that cut parameters, store the same bits as one rank.
  const std::uint64_t seed = std::random_device{}();
  BOOST_TEST_MESSAGE("random seed " << seed);
  const testing::AdamWScenario s = testing::make_adamw_scenario(seed);
  optim::AdamWOptions bf16;
  bf16.state_dtype = DType::bf16;
  bf16.rounding_seed = seed;
  auto run = [&](const Case& c, optim::AdamWOptions options, optim::OptimizerOffload offload) {
    testing::AdamWFinal out;
    std::mutex mutex;
    on_ranks(c.world, describe(c), [&](const CommPtr& world) {
      testing::run_final_state(world, c.strategy, c.zero3, s, options, offload, out, mutex);
    });
    return out;
  };
  const testing::AdamWFinal one = run(kCases[0], bf16, {});
  auto same = [](const testing::AdamWFinal& a, const testing::AdamWFinal& b) {
    return a.params == b.params && a.exp_avg == b.exp_avg && a.exp_avg_sq == b.exp_avg_sq;
  };
  for (const Case& c : kCases) BOOST_TEST(same(run(c, bf16, {}), one), describe(c));
  const fs::path scratch =
      fs::temp_directory_path() / ("zrt_bf16_moments_" + std::to_string(getpid()));
  fs::create_directories(scratch);
  for (const Case& c : {kCases[0], kCases[4], kCases[7]}) {
    BOOST_TEST(same(run(c, bf16, {optim::OptimizerOffload::Kind::host, "", 0}), one),
               describe(c) << " host");
    BOOST_TEST(same(run(c, bf16, {optim::OptimizerOffload::Kind::disk, scratch.string(), 37}), one),
               describe(c) << " disk");
  }
  fs::remove_all(scratch);
  // The moments are bf16 values, not f32's; another seed rounds otherwise.
  const testing::AdamWFinal f32 = run(kCases[0], {}, {});
  BOOST_TEST(f32.exp_avg != one.exp_avg);
  for (const auto& m : one.exp_avg_sq)
    for (double x : m) BOOST_TEST(double(float(x)) == x);
  optim::AdamWOptions other = bf16;
  other.rounding_seed = seed + 1;
  BOOST_TEST(run(kCases[0], other, {}).exp_avg != one.exp_avg);
  // Near the f32-state run: v (a sum of positive terms) gains at most one
  // bf16 spacing (2^-7 relative) per step.
  for (std::size_t i = 0; i < f32.params.size(); ++i)
    for (std::size_t e = 0; e < f32.params[i].size(); ++e) {
      BOOST_TEST(std::abs(one.exp_avg_sq[i][e] - f32.exp_avg_sq[i][e]) <=
                 6 * 0x1p-7 * std::abs(f32.exp_avg_sq[i][e]) + 1e-12);
      BOOST_TEST(std::abs(one.params[i][e] - f32.params[i][e]) <= 1e-3);
    }
}

BOOST_AUTO_TEST_CASE(decay_ranges_follow_the_policy_inside_each_shard) {
  on_ranks(3, "decay ranges", [](const CommPtr& world) {
    optim::StrategyPlan plan = optim::plan_strategy(optim::ShardingStrategy::full_shard, world, 3);
    optim::FlatParamHandle h(small_params(), plan.groups, {});
    const auto want = [&](const optim::DecayPolicy& policy) {
      // Elementwise: does shard element e belong to a decaying parameter?
      std::vector<bool> mask(static_cast<std::size_t>(h.zero1_shard().numel()), false);
      for (std::size_t i = 0; i < h.num_params(); ++i) {
        const auto& info = h.zero1_shard_infos()[i];
        if (policy(h.fqn(i), h.layout().params()[i].shape))
          for (std::int64_t e = 0; e < info.numel_in_shard; ++e)
            mask[info.offset_in_shard + e] = true;
      }
      return mask;
    };
    const optim::DecayPolicy only_ln = [](const std::string& fqn, const Shape&) {
      return fqn == "ln.weight";
    };
    for (const optim::DecayPolicy& policy : {optim::DecayPolicy(optim::decay_matrices), only_ln}) {
      std::vector<bool> got(static_cast<std::size_t>(h.zero1_shard().numel()), false);
      std::int64_t last_end = -1;
      for (const auto& r : optim::shard_decay_ranges(h, policy)) {
        if (r.begin <= last_end || r.end <= r.begin)
          throw testing::CheckFailed("ranges not sorted, disjoint, merged and non-empty");
        for (std::int64_t e = r.begin; e < r.end; ++e) got[e] = true;
        last_end = r.end;
      }
      if (got != want(policy))
        throw testing::CheckFailed("decay ranges differ from the elementwise mask");
    }
  });
}

BOOST_AUTO_TEST_CASE(bad_arguments_and_states_are_named) {
  on_ranks(2, "errors", [](const CommPtr& world) {
    optim::StrategyPlan full = optim::plan_strategy(optim::ShardingStrategy::full_shard, world, 2);
    optim::StrategyPlan hybrid =
        optim::plan_strategy(optim::ShardingStrategy::hybrid_shard, world, 1);
    optim::FlatParamHandle a(small_params(), full.groups, {});
    optim::FlatParamHandle b(small_params(), hybrid.groups, {});
    auto throws = [](auto&& fn, const char* needle) {
      try {
        fn();
      } catch (const InvalidArgument& e) {
        return std::string(e.what()).find(needle) != std::string::npos;
      } catch (const InvalidState& e) {
        return std::string(e.what()).find(needle) != std::string::npos;
      }
      return false;
    };
    ZRT_EXPECT(throws(
                   [&] {
                     optim::ZeroAdamW({&a, &b});
                   },
                   "other zero1/replica groups"),
               "mixed groups");
    ZRT_EXPECT(throws([&] { optim::ZeroAdamW({&a, &a}); }, "passed twice"), "duplicate handle");
    ZRT_EXPECT(
        throws([&] { optim::ZeroAdamW(std::vector<optim::FlatParamHandle*>{}); }, "no handles"),
        "no handles");
    ZRT_EXPECT(throws([&] { optim::ZeroAdamW({&a}, {.beta2 = 1.0}); }, "beta2"), "beta2");
    optim::ZeroAdamW opt({&a});
    ZRT_EXPECT(throws([&] { opt.step(-1e-3); }, "lr must be"), "negative lr");
    ZRT_EXPECT(opt.step_count() == 0 && opt.skipped_total() == 0,
               "a step refused for its lr was counted");
    ZRT_EXPECT(throws([&] { opt.step(std::nan("")); }, "lr must be"), "NaN lr");
    a.pre_forward();
    ZRT_EXPECT(throws([&] { opt.step(1e-3); }, "has a scope open; close every scope first"),
               "step during forward");
    a.post_forward();
    ZRT_EXPECT(throws([&] { opt.exp_avg(1, 0); }, "out of range"), "handle index");
    ZRT_EXPECT(throws([&] { opt.exp_avg(0, 9); }, "out of range"), "param index");
  });
}

BOOST_AUTO_TEST_SUITE_END()
