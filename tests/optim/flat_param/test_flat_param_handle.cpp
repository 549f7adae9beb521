// optim::FlatParamHandle on the local backend (ranks as threads): round trips,
// gradient reduction for every strategy, int8 gathers against a float64
// oracle, memory release, validation, states.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "tests/optim/flat_param/handle_checks.h"
#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/flat_param/sharding_groups.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace std::chrono_literals;

namespace {

struct Case {
  optim::ShardingStrategy strategy;
  int world;
  int zero3;
};

// Every strategy at world sizes 1..4 with zero3 sizes dividing them.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (int w = 1; w <= 4; ++w) {
    out.push_back({optim::ShardingStrategy::full_shard, w, w});
    out.push_back({optim::ShardingStrategy::shard_grad_op, w, w});
    out.push_back({optim::ShardingStrategy::no_shard, w, 1});
    for (int z = 1; z <= w; ++z) {
      if (w % z) continue;
      out.push_back({optim::ShardingStrategy::hybrid_shard, w, z});
      out.push_back({optim::ShardingStrategy::layer_zero, w, z});
    }
  }
  return out;
}

std::vector<optim::NamedParam> two_params() {
  return {{"a", "weight", Tensor::full({3, 2}, 1.5, DType::f32)},
          {"a", "bias", Tensor::full({3}, -1.0, DType::f32)}};
}

// Runs fn on n local ranks; a failure names the case and the rank's error.
void on_ranks(int n, const std::string& what, const std::function<void(const CommPtr&)>& fn) {
  try {
    run_local_ranks(n, fn, std::chrono::seconds(20));
  } catch (const std::exception& e) {
    BOOST_ERROR(what << " on " << n << " ranks: " << e.what());
  }
}

std::string describe(const Case& c) {
  return std::string(optim::strategy_name(c.strategy)) + " zero3=" + std::to_string(c.zero3);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flat_param_handle)

BOOST_AUTO_TEST_CASE(round_trip_every_strategy) {
  for (const auto& c : cases())
    for (DType dt : {DType::f32, DType::bf16})
      on_ranks(c.world, describe(c) + " " + dtype_name(dt),
               [&](const CommPtr& w) { testing::check_round_trip(w, c.strategy, c.zero3, dt); });
}

BOOST_AUTO_TEST_CASE(gradient_path_every_strategy) {
  for (const auto& c : cases())
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
      for (int micro : {1, 3})
        for (bool offload : {false, true})
          on_ranks(c.world,
                   describe(c) + " " + reduce_op_name(op) + " micro=" + std::to_string(micro) +
                       (offload ? " offload" : ""),
                   [&](const CommPtr& w) {
                     testing::check_gradient_path(w, c.strategy, c.zero3, op, micro, offload);
                   });
}

BOOST_AUTO_TEST_CASE(quantized_gather_every_strategy) {
  for (const Case& c : cases())
    for (DType t : {DType::f32, DType::bf16})
      on_ranks(c.world, describe(c) + " int8 gather in " + dtype_name(t), [&](const CommPtr& w) {
        testing::check_quantized_gather(w, c.strategy, c.zero3, t);
      });
}

BOOST_AUTO_TEST_CASE(quantized_gradient_reduce_every_strategy) {
  for (const Case& c : cases())
    for (const optim::ReduceDType t : {optim::ReduceDType::int8, optim::ReduceDType::int4})
      for (ReduceOp op : {ReduceOp::avg, ReduceOp::sum})
        on_ranks(c.world,
                 describe(c) + " " + optim::reduce_dtype_name(t) + " reduce " + reduce_op_name(op),
                 [&](const CommPtr& w) {
                   testing::check_gradient_path(w, c.strategy, c.zero3, op, 2, false, t);
                 });
}

BOOST_AUTO_TEST_CASE(quantized_gather_moves_fewer_bytes) {
  for (int n = 1; n <= 4; ++n)
    on_ranks(n, "int8 gather bytes", testing::check_quantized_gather_bytes);
}

BOOST_AUTO_TEST_CASE(mismatch_on_one_rank_is_named_on_all) {
  for (int n : {2, 3, 4}) {
    auto t0 = std::chrono::steady_clock::now();
    on_ranks(n, "mismatch", testing::check_mismatch_is_named);
    BOOST_TEST(
        (std::chrono::steady_clock::now() - t0 < 1s));  // an error, never a wait for a timeout
  }
}

BOOST_AUTO_TEST_CASE(wrong_state_calls) {
  auto world = make_local_world(1)[0];
  optim::StrategyPlan plan = optim::plan_strategy(optim::ShardingStrategy::full_shard, world, 0);
  optim::FlatParamHandle h(two_params(), plan.groups, {});
  BOOST_CHECK_THROW(h.post_forward(), InvalidState);
  BOOST_CHECK_THROW(h.post_backward(true), InvalidState);
  BOOST_CHECK_THROW(h.param(0).item(0), InvalidState);  // resharded: views are freed
  h.pre_forward();
  try {
    h.pre_backward();
    BOOST_FAIL("pre_backward during forward did not throw");
  } catch (const InvalidState& e) {
    BOOST_TEST(std::string(e.what()).find("FORWARD") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("pre_backward") != std::string::npos);
  }
  BOOST_CHECK_THROW(h.summon_full_params(), InvalidState);
  BOOST_TEST(h.param(1).item(2) == -1.0);
  h.post_forward();
  BOOST_TEST((h.state() == optim::HandleState::idle));
}

BOOST_AUTO_TEST_CASE(bad_construction) {
  auto world = make_local_world(1)[0];
  ZeroGroups g{world, world, nullptr};
  BOOST_CHECK_THROW(optim::FlatParamHandle({}, g, {}), InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamHandle({{"", "steps", Tensor::zeros({2}, DType::i64)}}, g, {}),
                    InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamHandle({{"", "a", Tensor::zeros({2}, DType::f32)},
                                            {"", "b", Tensor::zeros({2}, DType::bf16)}},
                                           g, {}),
                    InvalidArgument);
  BOOST_CHECK_THROW(optim::FlatParamHandle(two_params(), {world, nullptr, nullptr}, {}),
                    InvalidArgument);
  optim::FlatParamOptions bad_reduce;
  bad_reduce.grad_reduce.op = ReduceOp::max;
  BOOST_CHECK_THROW(optim::FlatParamHandle(two_params(), g, bad_reduce), InvalidArgument);

  // A parameter already in another flat parameter.
  auto params = two_params();
  optim::FlatParamOptions first;
  first.name = "first";
  optim::FlatParamHandle h(params, g, first);
  try {
    optim::FlatParamHandle again({params[1]}, g, {});
    BOOST_FAIL("a parameter joined two flat parameters");
  } catch (const InvalidArgument& e) {
    BOOST_TEST(std::string(e.what()).find("first") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("a.bias") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(zero1_size_must_be_a_multiple_of_zero3_size) {
  BOOST_CHECK_NO_THROW(run_local_ranks(
      6,
      [](const CommPtr& world) {
        ZeroGroups g{world->split(world->rank() / 2, 0), world->split(world->rank() / 3, 0),
                     nullptr};
        try {
          optim::FlatParamHandle h(two_params(), g, {});
        } catch (const InvalidArgument& e) {
          return;
        }
        throw std::runtime_error("zero1 size 2 with zero3 size 3 was accepted");
      },
      20s));
}

BOOST_AUTO_TEST_SUITE_END()
