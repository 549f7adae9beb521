// ZeroModule's own contract, on 2 local ranks: step() refuses gradients that
// no backward scope synced (Note [ZeroModule steps on synced gradients]) and
// steps on the ones that were.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>

#include "tests/optim/checkpoint/checkpoint_test_files.h"
#include "tests/optim/full_param_mismatch_check.h"
#include "tests/support/expect_throw.h"
#include "tests/support/rank_check.h"
#include "tests/support/test_seed.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/stream.h"

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
    // A second sync would replace the reduced gradient: refused, and the
    // first one's gradient is what the step applies.
    expect_invalid_state([&] { module.backward(unit, /*sync=*/true); },
                         "a second synced backward of a unit in one step");
    // A step vetoed by before_update, or refused for its lr, changes nothing:
    // the synced gradients stay for the next step.
    const Tensor before = module.full_param("fc.weight").clone();
    expect_invalid_state([&] { module.step(1e-3, [] { ZRT_THROW(InvalidState, "vetoed"); }); },
                         "a vetoed step");
    bool refused = false;
    try {
      module.step(std::nan(""));
    } catch (const InvalidArgument&) {
      refused = true;
    }
    ZRT_EXPECT(refused, "a NaN lr was not refused");
    ZRT_EXPECT(module.full_param("fc.weight").to_doubles() == before.to_doubles(),
               "a step that threw changed the weights");
    const auto result = module.step(1e-3);
    // Two micro-batches of 1.5 * g each.
    const double expected = 3.0 * std::sqrt(sq);
    ZRT_EXPECT(std::abs(result.grad_norm - expected) <= 1e-5 * expected, "grad norm ",
               result.grad_norm, ", expected ", expected);
    expect_invalid_state([&] { module.step(1e-3); },
                         "a second step with nothing synced since the first");
  });
}

// Note [Padded rows of a parameter]: what a caller writes into the padded
// rows of a gradient view counts for nothing: not in the gradient norm, and
// the padding, which no layer reads, stays zero after the step.
BOOST_AUTO_TEST_CASE(padded_rows_take_no_gradient) {
  const auto seed = test::test_seed("zero_module/padded_rows_take_no_gradient");
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);  // the same values on every rank
    std::normal_distribution<double> normal;
    std::vector<double> w(6), g(6);
    for (auto& x : w) x = normal(rng);
    double sq = 0;
    for (auto& x : g) {
      x = normal(rng);
      sq += x * x;
    }
    optim::ZeroModule module(world);
    const Tensor W = Tensor::from_doubles(w, DType::f32, Device::cpu(), {3, 2});
    const auto unit =
        module.add_unit("emb", std::vector<optim::NamedParam>{{"emb", "weight", W, 2}});
    // A later unit uses it too (tied across units): its own gradient view is
    // padded alike, and what it writes there is added to the owner's.
    const auto user = module.add_unit(
        "head",
        std::vector<optim::NamedParam>{{"head", "bias", Tensor::from_doubles({0.5}, DType::f32)},
                                       {"head", "weight", W, 2}});
    for (const auto& u : {user, unit}) {  // the users' backward before the owner's
      auto scope = module.backward(u, /*sync=*/true);
      Tensor grad = scope.grad("weight");
      ZRT_EXPECT(grad.shape() == Shape({5, 2}), "the gradient view is ", grad.str());
      for (int i = 0; i < 6; ++i) grad.data<float>()[i] += static_cast<float>(g[i] / 2);
      for (int i = 6; i < 10; ++i) grad.data<float>()[i] += 100.0f;  // the padded rows
    }
    const double norm = module.step(1e-3).grad_norm;
    ZRT_EXPECT(std::abs(norm - std::sqrt(sq)) <= 1e-5 * std::sqrt(sq), "grad norm ", norm,
               ", expected ", std::sqrt(sq), " (the padded rows' 100s counted)");
    auto scope = module.forward(unit);
    const std::vector<double> padded = scope.param("weight").to_doubles();
    for (int i = 6; i < 10; ++i)
      ZRT_EXPECT(padded[static_cast<std::size_t>(i)] == 0.0, "padded element ", i, " is ",
                 padded[static_cast<std::size_t>(i)]);
  });
}

// A unit whose backward a step skips steps on a zero gradient, never on
// the gradient an earlier step reduced into its shard (Note [ZeroModule
// steps on synced gradients]).
BOOST_AUTO_TEST_CASE(a_unit_without_backward_steps_on_a_zero_gradient) {
  const auto seed = test::test_seed("zero_module/a_unit_without_backward_steps_on_a_zero_gradient");
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);
    optim::ZeroModule module(world);
    const auto a = module.add_unit("a", unit_params(rng));
    const auto b = module.add_unit("b", unit_params(rng));
    std::normal_distribution<double> normal;
    auto fill = [&](optim::ZeroModule::Scope& scope) {
      for (const char* name : {"weight", "bias"}) {
        Tensor g = scope.grad(name);
        for (std::int64_t i = 0; i < g.numel(); ++i)
          g.data<float>()[i] = static_cast<float>(1 + normal(rng) * 0.1);
      }
    };
    for (auto u : {b, a}) {
      auto scope = module.backward(u);
      fill(scope);
    }
    ZRT_EXPECT(module.step(1e-3).grad_norm > 1, "the first step's gradients are ones");
    {
      auto scope = module.backward(b);  // b's gradient is zero; a has no backward
    }
    const auto r = module.step(1e-3);
    ZRT_EXPECT(r.grad_norm == 0, "step 2's only gradient is b's zero, but its norm is ",
               r.grad_norm, " (a's step-1 gradient applied again)");
  });
}

// A backward scope ended by an exception on one rank: its partial gradient
// is still reduced (the ranks stay in step), and the next step is skipped on
// every rank, nothing updated; the step after it trains (Note [A failed
// backward skips the step]).
BOOST_AUTO_TEST_CASE(a_backward_ended_by_an_exception_skips_the_step_everywhere) {
  const auto seed =
      test::test_seed("zero_module/a_backward_ended_by_an_exception_skips_the_step_everywhere");
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);
    optim::ZeroModule module(world);
    const auto unit = module.add_unit("fc", unit_params(rng));
    const Tensor before = module.full_param("fc.weight").clone();
    try {
      auto scope = module.backward(unit);
      scope.grad("weight").fill_(0.5);  // part of the backward
      if (world->rank() == 0) throw std::runtime_error("the caller's layer failed");
    } catch (const std::runtime_error&) {
    }
    // A retry of the micro-batch is told how, where the exception was.
    std::string retry;
    try {
      auto scope = module.backward(unit);
    } catch (const InvalidState& e) {
      retry = e.what();
    }
    ZRT_EXPECT(retry.find(world->rank() == 0
                              ? "its backward this step ended by an exception, so step() would "
                                "skip this step; to retry, call discard_gradients()"
                              : "pass sync=false to every backward") != std::string::npos,
               "rank ", world->rank(), ": '", retry, "'");
    const auto skipped = module.step(1e-2);
    ZRT_EXPECT(skipped.skipped, "rank ", world->rank(),
               ": the step on a partial gradient was taken");
    ZRT_EXPECT(module.full_param("fc.weight").to_doubles() == before.to_doubles(), "rank ",
               world->rank(), ": a skipped step changed the weights");
    {
      auto scope = module.backward(unit);
      scope.grad("weight").fill_(0.5);
    }
    ZRT_EXPECT(!module.step(1e-2).skipped, "rank ", world->rank(), ": the next step was skipped");
    ZRT_EXPECT(module.full_param("fc.weight").to_doubles() != before.to_doubles(), "rank ",
               world->rank(), ": the next step changed nothing");
  });
}

// Out of memory while a backward scope closes: the unit is idle again,
// discard_gradients() works, and a retry meets only the memory limit.
BOOST_AUTO_TEST_CASE(a_failed_backward_close_leaves_the_module_usable) {
  const CommPtr world = make_local_world(1).front();
  optim::ZeroModuleOptions o;
  o.dtype = DType::bf16;
  o.memory_limit = std::size_t{16} << 20;
  o.cpu_streams = optim::CpuStreams::none;
  optim::ZeroModule module(world, o);
  const auto unit = module.add_unit("big", {{"w", Tensor::zeros({1 << 20}, DType::f32)}});
  bool failed = false;
  try {
    auto scope = module.backward(unit);
    scope.grad("w").fill_(1.0);
    scope.close();  // the fp32 gradient does not fit
  } catch (const OutOfMemory&) {
    failed = true;
  }
  BOOST_TEST_REQUIRE(failed, "the close fit in memory: the test needs a smaller limit");
  BOOST_TEST((module.handle(unit).state() == optim::HandleState::idle));
  module.discard_gradients();
  // A retry opens (no scope is said to be open) and fails as memory
  // refuses it, once more leaving the unit idle.
  bool retry_failed = false;
  try {
    auto scope = module.backward(unit);
    scope.close();
  } catch (const OutOfMemory&) {
    retry_failed = true;
  }
  BOOST_TEST(retry_failed);
  BOOST_TEST((module.handle(unit).state() == optim::HandleState::idle));
}

// A backward scope that fails to open after its unit's pre_backward (here
// the wait for a failed compute stream) leaves the unit idle, not in
// BACKWARD_PRE, where every later call would blame a scope still open.
BOOST_AUTO_TEST_CASE(a_backward_scope_that_fails_to_open_leaves_its_unit_idle) {
  const CommPtr world = make_local_world(1).front();
  optim::ZeroModuleOptions o;
  o.cpu_streams = optim::CpuStreams::all;  // the compute stream is a thread of its own
  optim::ZeroModule module(world, o);
  std::mt19937 rng(
      test::test_seed("zero_module/a_backward_scope_that_fails_to_open_leaves_its_unit_idle"));
  const auto unit = module.add_unit("fc", unit_params(rng));
  run_on_cpu_stream(module.stream(), "a failing kernel",
                    [] { throw std::runtime_error("the kernel failed"); });
  bool failed = false;
  try {
    auto scope = module.backward(unit);  // for the calling thread: waits for the stream
  } catch (const std::exception&) {
    failed = true;
  }
  BOOST_TEST_REQUIRE(failed, "the scope opened on a failed stream");
  BOOST_TEST((module.handle(unit).state() == optim::HandleState::idle));
}

// The optimizer stepped directly (then discard_gradients, as the header
// says) reads the gradients once their reduction on the communication
// stream is done: the norm it reports is the reduced gradients' norm.
BOOST_AUTO_TEST_CASE(the_optimizer_stepped_directly_reads_reduced_gradients) {
  const auto seed = test::test_seed("zero_module/the_optimizer_stepped_directly");
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);
    optim::ZeroModuleOptions options;
    options.cpu_streams = optim::CpuStreams::comm;  // the reduction runs beside the host
    optim::ZeroModule module(world, options);
    const auto unit = module.add_unit("fc", unit_params(rng));
    for (int step = 0; step < 3; ++step) {
      module.forward(unit).close();
      {
        auto scope = module.backward(unit);
        scope.grad("weight").fill_(1.0);
        scope.grad("bias").fill_(1.0);
      }
      const double norm = module.optimizer().step(1e-3).grad_norm;
      module.discard_gradients();
      ZRT_EXPECT(std::abs(norm - 4.0) <= 1e-6, "step ", step, ": grad norm ", norm,
                 ", expected 4 (16 gradients of 1)");
    }
  });
}

// Note [Gathers after the update]: ZeroAdamW hands each unit over as soon
// as it is updated, before the next one is (with the moments in memory, in
// host memory, and on disk, in chunks that cut units); ZeroModule::step
// gathers the listed units there, in the list's order, and their next
// scopes find them gathered with the updated values (no gather of their own).
BOOST_AUTO_TEST_CASE(listed_units_are_gathered_as_they_are_updated) {
  const auto seed = test::test_seed("zero_module/listed_units_are_gathered_as_they_are_updated");
  test::TempDir scratch;
  std::vector<optim::OptimizerOffload> offloads(3);
  offloads[1].kind = optim::OptimizerOffload::Kind::host;
  // Shards of 3, 7 and 11 elements on 2 ranks: units 1 and 2 span chunks.
  offloads[2] = {optim::OptimizerOffload::Kind::disk, scratch.str(), 4};
  for (const optim::OptimizerOffload& offload : offloads)
    run_local_ranks(2, [&](const CommPtr& world) {
      std::mt19937 rng(seed);
      optim::ZeroModuleOptions options;
      options.offload_optimizer = offload;
      optim::ZeroModule module(world, options);
      // Three units of different sizes (their gathers tell them apart by bytes).
      std::vector<optim::ZeroModule::Unit> units;
      for (int u = 0; u < 3; ++u) {
        std::vector<double> w(static_cast<std::size_t>(5 + 8 * u));
        for (auto& x : w) x = std::normal_distribution<double>()(rng);
        units.push_back(module.add_unit("u" + std::to_string(u),
                                        {{"weight", Tensor::from_doubles(w, DType::f32)}}));
      }
      auto train_scopes = [&] {
        for (auto u : units) module.forward(u).close();
        for (auto it = units.rbegin(); it != units.rend(); ++it) {
          auto scope = module.backward(*it, /*sync=*/true);
          Tensor g = scope.grad("weight");
          for (std::int64_t i = 0; i < g.numel(); ++i)
            g.data<float>()[i] += static_cast<float>(0.01 * (i + 1) * (world->rank() + 1));
          scope.close();
        }
        module.synchronize();
      };
      train_scopes();
      module.wait_for_reduced_grads();
      auto masters = [&] {
        module.synchronize();
        std::vector<std::vector<double>> out;
        for (auto u : units) out.push_back(module.handle(u).zero1_shard().to_doubles());
        return out;
      };
      const auto before = masters();
      std::vector<std::size_t> handed;
      std::vector<std::vector<std::vector<double>>>
          seen;  // the masters as each unit is handed over
      module.optimizer().step(1e-2, nullptr, {}, [&](std::size_t k) {
        for (std::size_t j = 0; j < units.size(); ++j)
          ZRT_EXPECT(module.handle(units[j]).needs_param_sync() == (j <= k), "after unit ", k,
                     "'s update, unit ", j, (j <= k ? " is not" : " is already"),
                     " marked updated");
        handed.push_back(k);
        seen.push_back(masters());
      });
      ZRT_EXPECT((handed == std::vector<std::size_t>{0, 1, 2}), "units handed over out of order");
      // Unit k is handed over with its whole update done and before any of the
      // next units' (on disk: the last chunk of k, not every unit's chunks).
      const auto after = masters();
      for (std::size_t k = 0; k < seen.size(); ++k)
        for (std::size_t j = 0; j < units.size(); ++j) {
          ZRT_EXPECT(before[j] != after[j], "unit ", j, "'s update changed nothing");
          ZRT_EXPECT(seen[k][j] == (j <= k ? after[j] : before[j]), "offload ", offload.str(),
                     ": when unit ", k, " is handed over, unit ", j, "'s master is ",
                     j <= k ? "not yet updated" : "already updated");
        }
      module.discard_gradients();  // the step taken past ZeroModule::step ends here

      train_scopes();
      const auto flights_before = world->flight_recorder()->entries().size();
      const std::vector<optim::ZeroModule::Unit> first = {units[2], units[0]};
      module.step(1e-2, {}, first);
      module.synchronize();
      const auto entries = world->flight_recorder()->entries();
      std::vector<std::uint64_t> gathered;  // the step's all-gathers' bytes, in issue order
      for (std::size_t e = flights_before; e < entries.size(); ++e)
        if (entries[e].op == "all_gather") gathered.push_back(entries[e].bytes);
      const auto bytes = [&](std::size_t u) {
        return static_cast<std::uint64_t>(module.handle(units[u]).full_param_padded().nbytes());
      };
      ZRT_EXPECT((gathered == std::vector<std::uint64_t>{bytes(2), bytes(0)}), "the step gathered ",
                 gathered.size(), " units, not units 2 then 0");
      ZRT_EXPECT(module.handle(units[2]).is_unsharded() && module.handle(units[0]).is_unsharded() &&
                     !module.handle(units[1]).is_unsharded(),
                 "units 2 and 0 (only) are gathered after the step");
      // Their scopes gather nothing more and see the updated parameters.
      const auto full = module.full_params();
      const auto flights_scoped = world->flight_recorder()->entries().size();
      for (std::size_t u : {2, 0}) {
        auto scope = module.forward(units[u]);
        const Tensor p = scope.param("weight");
        const Tensor want = full.at("u" + std::to_string(u) + ".weight");
        ZRT_EXPECT(p.to_doubles() == want.to_doubles(), "unit ", u,
                   "'s gathered parameter is not its updated value");
      }
      ZRT_EXPECT(world->flight_recorder()->entries().size() == flights_scoped,
                 "the scopes of units gathered after the update gathered again");
    });
}

// Note [Collective contract]: rank 0's full_param(name) beside the others'
// full_params() is one error on every rank naming both calls, not a hang or
// a gather of the wrong unit.
BOOST_AUTO_TEST_CASE(full_param_on_one_rank_is_named_on_all) {
  const auto seed = test::test_seed("zero_module/full_param_on_one_rank_is_named_on_all");
  for (int n : {2, 3})
    BOOST_CHECK_NO_THROW(run_local_ranks(
        n, [&](const CommPtr& world) { testing::check_full_param_mismatch_is_named(world, seed); },
        std::chrono::seconds(20)));
}

// Ranks that open scopes of different units gather different sizes: the
// mismatch names each rank's scope (Note [Collective contract]), in every
// stream mode, wherever the gather ran.
BOOST_AUTO_TEST_CASE(scopes_of_different_units_are_named) {
  const auto seed = test::test_seed("zero_module/scopes_of_different_units_are_named");
  for (const auto mode : {optim::CpuStreams::none, optim::CpuStreams::comm, optim::CpuStreams::all})
    run_local_ranks(
        2,
        [&](const CommPtr& world) {
          std::mt19937 rng(seed);
          optim::ZeroModuleOptions options;
          options.cpu_streams = mode;
          optim::ZeroModule module(world, options);
          const auto fc1 = module.add_unit("fc1", unit_params(rng));  // 16 elements
          std::vector<double> w(37);
          for (auto& x : w) x = std::normal_distribution<double>()(rng);
          const auto fc2 =
              module.add_unit("fc2", {{"weight", Tensor::from_doubles(w, DType::f32)}});
          std::string message;
          try {
            auto scope = module.forward(world->rank() == 0 ? fc1 : fc2);
            scope.close();
            module.synchronize();
          } catch (const CommError& e) {
            message = e.what();
          }
          ZRT_EXPECT(message.find("in forward('fc1')") != std::string::npos &&
                         message.find("in forward('fc2')") != std::string::npos,
                     "CPU streams ", optim::cpu_streams_name(mode), ": rank ", world->rank(),
                     " got '", message, "'");
        },
        std::chrono::seconds(20));
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

// load_checkpoint replaces the weights: gradients accumulated before it
// (a roll-back mid-accumulation) are dropped, and it waits for no open scope.
BOOST_AUTO_TEST_CASE(a_checkpoint_load_drops_the_gradients_before_it) {
  const auto seed = test::test_seed("zero_module/a_checkpoint_load_drops_the_gradients_before_it");
  test::TempDir scratch;
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);
    optim::ZeroModule module(world);
    const auto unit = module.add_unit("fc", unit_params(rng));
    const std::string dir =
        optim::save_checkpoint(module, 0, optim::checkpoint_into(scratch.str() + "/ck"));
    auto fill_grads = [&](bool sync, double value) {
      auto scope = module.backward(unit, sync);
      scope.grad("weight").fill_(value);
      scope.grad("bias").fill_(value);
    };
    fill_grads(/*sync=*/false, 100);  // a micro-batch's gradient of the replaced weights
    {
      auto open = module.forward(unit);
      expect_invalid_state([&] { optim::load_checkpoint(module, dir); },
                           "a load with a scope open");
    }
    optim::load_checkpoint(module, dir);
    fill_grads(/*sync=*/true, 1);
    const double norm = module.step(1e-3).grad_norm;  // 16 elements of 1 (the mean of the ranks)
    ZRT_EXPECT(std::abs(norm - 4.0) <= 1e-6, "grad norm ", norm,
               " after the load, expected 4: gradients from before it were applied");
  });
}

// Note [No step inside a step]: step(), discard_gradients() and
// load_checkpoint() called from a step's before_update are refused, on
// every rank, and the outer step changes nothing (a veto); the next step
// applies the one gradient once.
BOOST_AUTO_TEST_CASE(no_step_inside_a_step) {
  const auto seed = test::test_seed("zero_module/no_step_inside_a_step");
  test::TempDir scratch;
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 rng(seed);
    optim::ZeroModule module(world);
    const auto unit = module.add_unit("fc", unit_params(rng));
    const std::string dir =
        optim::save_checkpoint(module, 0, optim::checkpoint_into(scratch.str() + "/ck"));
    {
      auto scope = module.backward(unit);
      scope.grad("weight").fill_(1);
      scope.grad("bias").fill_(1);
    }
    const auto before = module.full_param("fc.weight").to_doubles();
    // The optimizer's own step refuses inside its step as well, made
    // through the module or directly.
    const std::string in_module = "called while a step() runs",
                      in_optimizer = "called while a step of this optimizer runs";
    auto through_module = [&](const std::function<void()>& call) { module.step(1e-3, call); };
    auto directly = [&](const std::function<void()>& call) {
      module.optimizer().step(1e-3, nullptr, call);
    };
    auto optimizer_step = [&] { module.optimizer().step(1e-3); };
    struct Inner {
      const char* name;
      std::function<void(const std::function<void()>&)> outer;
      std::function<void()> call;
      std::string said;
    };
    const std::vector<Inner> inner = {
        {"step", through_module, [&] { module.step(1e-3); }, in_module},
        {"discard_gradients", through_module, [&] { module.discard_gradients(); }, in_module},
        {"load_checkpoint", through_module, [&] { optim::load_checkpoint(module, dir); },
         in_module},
        {"optimizer().step", through_module, optimizer_step, in_optimizer},
        {"optimizer().step in its own step", directly, optimizer_step, in_optimizer},
        {"load_counters in the optimizer's step", directly,
         [&] { module.optimizer().load_counters(5, 0, 0); }, in_optimizer},
        {"discard_gradients in the optimizer's step", directly, [&] { module.discard_gradients(); },
         in_module},
        {"load_checkpoint in the optimizer's step", directly,
         [&] { optim::load_checkpoint(module, dir); }, in_module}};
    for (const auto& [name, outer, call, said] : inner) {
      std::string message;
      try {
        outer(call);
      } catch (const InvalidState& e) {
        message = e.what();
      }
      ZRT_EXPECT(message.find(said) != std::string::npos, name, " inside before_update: '", message,
                 "'");
      ZRT_EXPECT(!module.stepping(), "still stepping after ", name);
      ZRT_EXPECT(module.full_param("fc.weight").to_doubles() == before, name,
                 " inside before_update changed the weights");
    }
    const auto result = module.step(1e-3);
    ZRT_EXPECT(result.step == 1, "the optimizer counts ", result.step, " steps, expected 1");
    // AdamW's first step on a gradient of ones moves each weight by lr, and
    // weight decay (1e-2) by lr * 1e-2 * w: two steps would move it twice.
    const auto after = module.full_param("fc.weight").to_doubles();
    for (std::size_t i = 0; i < after.size(); ++i) {
      const double expected = 1e-3 + 1e-5 * before[i];
      ZRT_EXPECT(std::abs(before[i] - after[i] - expected) <= 1e-6, "element ", i, " moved ",
                 before[i] - after[i], ", expected one step: ", expected);
    }
    {
      auto scope = module.backward(unit);
      scope.grad("weight").fill_(1);
    }
    std::string message;
    try {
      module.optimizer().step(1e-3, nullptr, {},
                              [&](std::size_t) { module.optimizer().step(1e-3); });
    } catch (const InvalidState& e) {
      message = e.what();
    }
    ZRT_EXPECT(message.find(in_optimizer) != std::string::npos, "a step inside after_update: '",
               message, "'");
  });
}

// Note [Initial values agree across ranks]: values seeded by rank, or a NaN
// on one rank, end add_unit in the same error on every rank (no hang, no
// mix of the ranks' models).
BOOST_AUTO_TEST_CASE(initial_values_agree_across_ranks) {
  const auto seed = test::test_seed("zero_module/initial_values_agree_across_ranks");
  auto error_on_every_rank = [&](const std::function<double(int rank, int i)>& value,
                                 const std::string& part) {
    run_local_ranks(3, [&](const CommPtr& world) {
      std::vector<double> w(7);
      for (int i = 0; i < 7; ++i) w[i] = value(world->rank(), i);
      optim::ZeroModule module(world);
      std::string message;
      try {
        module.add_unit("fc", {{"w", Tensor::from_doubles(w, DType::f32)}});
      } catch (const InvalidArgument& e) {
        message = e.what();
      }
      ZRT_EXPECT(message.find(part) != std::string::npos, "rank ", world->rank(), ": '", message,
                 "' does not name ", part);
    });
  };
  std::mt19937 rng(seed);
  std::vector<double> base(7);
  for (double& x : base) x = std::normal_distribution<double>()(rng);
  error_on_every_rank([&](int r, int i) { return base[i] + (r == 2 && i == 6 ? 1e-6 : 0.0); },
                      "rank 2 passed other initial values than rank 0");
  error_on_every_rank([&](int r, int i) { return r == 1 && i == 3 ? std::nan("") : base[i]; },
                      "parameter 'fc.w' holds NaN or infinite values on rank 1");
  // Other parameters: named over the world in every strategy, also where
  // the ranks share no zero1 group (no-shard; hybrid's replicas) and the
  // element counts agree (two units of one shape added in another order).
  for (auto strategy : {optim::ShardingStrategy::full_shard, optim::ShardingStrategy::no_shard,
                        optim::ShardingStrategy::hybrid_shard}) {
    const std::string name = optim::strategy_name(strategy);
    const int zero3_size = strategy == optim::ShardingStrategy::hybrid_shard ? 1 : 0;
    run_local_ranks(2, [&](const CommPtr& world) {
      optim::ZeroModule module(world, {.strategy = strategy, .zero3_size = zero3_size});
      std::vector<std::pair<std::string, Tensor>> ps = {
          {"w", Tensor::from_doubles(base, DType::f32)}};
      if (world->rank() == 1) ps.push_back({"b", Tensor::from_doubles({std::nan("")}, DType::f32)});
      std::string message;
      try {
        module.add_unit("fc", ps);
      } catch (const InvalidArgument& e) {
        message = e.what();
      }
      ZRT_EXPECT(message.find("the ranks passed other parameters") != std::string::npos &&
                     message.find("parameter 1: rank 0 has nothing; rank 1 has 'fc.b' [1]") !=
                         std::string::npos,
                 name, " rank ", world->rank(), ": '", message, "'");
    });
    run_local_ranks(2, [&](const CommPtr& world) {
      optim::ZeroModule module(world, {.strategy = strategy, .zero3_size = zero3_size});
      const std::vector<std::string> order = world->rank() == 0
                                                 ? std::vector<std::string>{"a", "b"}
                                                 : std::vector<std::string>{"b", "a"};
      std::string message;
      try {
        for (const std::string& unit : order)
          module.add_unit(unit, {{"w", Tensor::from_doubles(base, DType::f32)}});
      } catch (const InvalidArgument& e) {
        message = e.what();
      }
      ZRT_EXPECT(message.find("parameter 0: rank 0 has 'a.w' [7]; rank 1 has 'b.w' [7]") !=
                     std::string::npos,
                 name, " rank ", world->rank(), ": '", message, "'");
    });
  }
  // A view of a tensor's first values given with the tensor itself is no
  // second name of it: copied into two parameters, they would no longer
  // share their memory. Refused on every rank, whatever the values.
  run_local_ranks(2, [&](const CommPtr& world) {
    std::vector<double> w = base;
    if (world->rank() == 1) w[6] += 1e-6;
    const Tensor whole = Tensor::from_doubles(w, DType::f32);
    optim::ZeroModule module(world);
    std::string message;  // checked with ZRT_EXPECT: Boost.Test's checks are not for rank threads
    try {
      module.add_unit("fc", {{"head", whole.narrow(0, 2)}, {"w", whole}});
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    ZRT_EXPECT(message.find("parameter 'fc.w' shares part of its memory with parameter "
                            "'fc.head' of this unit") != std::string::npos,
               "rank ", world->rank(), ": '", message, "'");
  });
  run_local_ranks(3, [&](const CommPtr& world) {  // equal values pass
    optim::ZeroModule module(world);
    module.add_unit("fc", {{"w", Tensor::from_doubles(base, DType::f32)}});
  });
}

// Note [Ranks agree on their settings]: a rank given another strategy,
// dtype, AdamW setting or optimizer offload than the others is named, with
// its value, by every rank as the modules are built (another strategy would
// otherwise split other groups: a collective mismatch naming no option).
BOOST_AUTO_TEST_CASE(ranks_given_different_options_are_named) {
  struct Case {
    std::function<void(optim::ZeroModuleOptions&)> change;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](auto& o) {
         o.strategy = optim::ShardingStrategy::hybrid_shard;
         o.zero3_size = 1;
       },
       "strategy: rank 0 has full; rank 2 has hybrid"},
      {[](auto& o) { o.dtype = DType::bf16; }, "dtype: rank 0 has f32; rank 2 has bf16"},
      {[](auto& o) { o.adamw.beta2 = 0.95; }, "adamw.beta2: rank 0 has 0.999; rank 2 has 0.95"},
      {[](auto& o) { o.adamw.state_dtype = DType::bf16; },
       "adamw.state_dtype: rank 0 has f32; rank 2 has bf16"},
      {[](auto& o) { o.offload_optimizer = optim::parse_optimizer_offload("host"); },
       "offload_optimizer: rank 0 has none; rank 2 has host"},
      {[](auto& o) { o.loss_scaler = optim::LossScalerOptions{.init_scale = 1024}; },
       "loss_scaler: rank 0 has none; rank 2 has true, init 1024, growth 2 every 2000"},
      // Other and invalid on one rank: named by every rank, before that
      // rank's own check would fail it alone.
      {[](auto& o) { o.dtype = DType::i32; }, "dtype: rank 0 has f32; rank 2 has i32"}};
  for (const Case& c : cases)
    run_local_ranks(3, [&](const CommPtr& world) {
      optim::ZeroModuleOptions options;
      if (world->rank() == 2) c.change(options);
      std::string message;  // checked with ZRT_EXPECT: Boost.Test's checks are not for rank threads
      try {
        optim::ZeroModule module(world, options);
      } catch (const InvalidArgument& e) {
        message = e.what();
      }
      ZRT_EXPECT(message.find("the ranks were given different options") != std::string::npos &&
                     message.find(c.expected) != std::string::npos,
                 "rank ", world->rank(), ": '", message, "' does not name ", c.expected);
    });
  // A rank's own disk directory, memory limit and CPU streams may differ.
  test::TempDir scratch;
  for (const char* r : {"/r0", "/r1"}) std::filesystem::create_directory(scratch.str() + r);
  run_local_ranks(2, [&](const CommPtr& world) {
    optim::ZeroModuleOptions options;
    options.offload_optimizer = optim::parse_optimizer_offload("disk:" + scratch.str() + "/r" +
                                                               std::to_string(world->rank()));
    options.memory_limit = world->rank() == 0 ? 0 : std::size_t{1} << 30;
    options.cpu_streams = world->rank() == 0 ? optim::CpuStreams::none : optim::CpuStreams::all;
    optim::ZeroModule module(world, options);
  });
  // ... but a directory that cannot hold the moments on one rank is named
  // by every rank (the others would wait for it in the next collective).
  run_local_ranks(3, [&](const CommPtr& world) {
    optim::ZeroModuleOptions options;
    options.offload_optimizer = optim::parse_optimizer_offload(
        "disk:" + scratch.str() + (world->rank() == 1 ? "/gone" : "/r0"));
    std::string message;
    try {
      optim::ZeroModule module(world, options);
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    ZRT_EXPECT(message.find("offload_optimizer.dir: rank 0 has usable; rank 1 has scratch "
                            "directory " +
                            scratch.str() + "/gone does not exist") != std::string::npos,
               "rank ", world->rank(), ": '", message, "'");
  });
  // ... and so is a directory beside a host offload on one rank.
  run_local_ranks(2, [&](const CommPtr& world) {
    optim::ZeroModuleOptions options;
    options.offload_optimizer = {.kind = optim::OptimizerOffload::Kind::host,
                                 .dir = world->rank() == 1 ? scratch.str() : ""};
    std::string message;
    try {
      optim::ZeroModule module(world, options);
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    ZRT_EXPECT(
        message.find("rank 1 has optimizer offload host writes no files") != std::string::npos,
        "rank ", world->rank(), ": '", message, "'");
  });
}

// Misuse of the module names the call the caller made and what to do, not
// an inner object's state or a library's parse error.
BOOST_AUTO_TEST_CASE(misuse_is_named_in_the_callers_terms) {
  auto expect = [](auto&& call, const std::string& part) { test::expect_throw<Error>(call, part); };
  const CommPtr world = make_local_world(1).front();
  std::mt19937 rng(test::test_seed("zero_module/misuse_is_named_in_the_callers_terms"));
  optim::ZeroModule module(world);
  const auto unit = module.add_unit("fc", unit_params(rng));
  {
    auto scope = module.forward(unit);
    expect([&] { module.step(1e-3); }, "ZeroModule::step: unit 'fc' has a forward scope open");
  }
  {
    auto scope = module.backward(unit);
    expect([&] { module.discard_gradients(); },
           "ZeroModule::discard_gradients: unit 'fc' has a backward scope open");
    expect([&] { module.full_params(); },
           "ZeroModule::full_params: unit 'fc' has a backward scope open");
    expect([&] { module.full_param("fc.weight"); },
           "ZeroModule::full_param: unit 'fc' has a scope open");
  }
  // A caller's mistake is said without zrt's check and source place.
  auto said_to_caller = [](auto&& call, const std::string& part) {
    try {
      call();
      BOOST_ERROR("accepted; expected an error naming " << part);
    } catch (const InvalidState& e) {
      const std::string m = e.what();
      BOOST_TEST((m.find(part) != std::string::npos && m.find("[check") == std::string::npos &&
                  m.find(".cpp") == std::string::npos),
                 m);
    }
  };
  {
    const auto weight = module.param_views(unit, "weight").param;
    const Tensor x = Tensor::zeros({2, 5}, DType::f32), y = Tensor::zeros({2, 3}, DType::f32);
    said_to_caller([&] { kernels::gemm(x, false, weight, true, y); },
                   "gemm: fc.weight[3, 5] f32 cpu has no memory outside its unit's scope");
    auto scope = module.forward(unit);
    said_to_caller([&] { module.optimizer().step(1e-3); },
                   "ZeroAdamW::step: unit 'fc' has a scope open");
  }
  test::TempDir scratch;
  expect([&] { optim::save_checkpoint(module, 1, optim::checkpoint_into(scratch.str(), -3)); },
         "keep_last must be >= 0");
  optim::CheckpointSaveOptions bad_json = optim::checkpoint_into(scratch.str());
  bad_json.run_json = "{\"lr\": ";
  expect([&] { optim::save_checkpoint(module, 1, bad_json); }, "run_json is not JSON");
  expect([&] { optim::ZeroModule(world, {.strategy = static_cast<optim::ShardingStrategy>(99)}); },
         "sharding strategy code 99 is none of");
  // A group size the strategy does not read is refused, not ignored.
  expect(
      [&] {
        optim::ZeroModule(world,
                          {.strategy = optim::ShardingStrategy::full_shard, .zero3_size = 2});
      },
      "zero3_size 2 with strategy full, whose zero3 group is the world (1)");
  expect(
      [&] {
        optim::ZeroModule(world, {.strategy = optim::ShardingStrategy::no_shard, .zero3_size = 2});
      },
      "zero3_size 2 with strategy no-shard, whose zero3 group is each rank alone (1)");
  optim::ZeroModule(world, {.strategy = optim::ShardingStrategy::full_shard, .zero3_size = 1});
  // ... and one that does not divide the world, on every rank.
  run_local_ranks(3, [&](const CommPtr& w) {
    std::string message;  // checked with ZRT_EXPECT: Boost.Test's checks are not for rank threads
    try {
      optim::ZeroModule(w, {.strategy = optim::ShardingStrategy::hybrid_shard, .zero3_size = 2});
    } catch (const InvalidArgument& e) {
      message = e.what();
    }
    ZRT_EXPECT(message.find("ZeroModule: zero3_size 2 does not divide the world's 3 ranks "
                            "(strategy hybrid)") != std::string::npos,
               "rank ", w->rank(), ": '", message, "'");
  });
  // The optimizer's settings are refused when the module is made, not at
  // its first step.
  expect([&] { optim::ZeroModule(world, {.adamw = {.beta1 = 1.0}}); }, "AdamW beta1 must be in");
  expect([&] { optim::ZeroModule(world, {.adamw = {.max_grad_norm = -1}}); },
         "AdamW max_grad_norm must be finite and >= 0");
  using Offload = optim::OptimizerOffload;
  expect([&] { optim::ZeroModule(world, {.offload_optimizer = {.kind = Offload::Kind::disk}}); },
         "no scratch directory given");
  expect(
      [&] {
        optim::ZeroModule(world, {.offload_optimizer = {.kind = Offload::Kind::disk,
                                                        .dir = scratch.str() + "/none"}});
      },
      "does not exist or is not a directory");
  expect(
      [&] {
        optim::ZeroModule(
            world, {.offload_optimizer = {.kind = Offload::Kind::host, .dir = scratch.str()}});
      },
      "optimizer offload host writes no files");
  expect(
      [&] {
        optim::ZeroModule(
            world, {.offload_optimizer = {
                        .kind = Offload::Kind::disk, .dir = scratch.str(), .chunk_elements = 0}});
      },
      "chunk of 0 elements");
  expect([&] { optim::ZeroModule(world, {.gather = {.dtype = optim::GatherDType(77)}}); },
         "parameter gather dtype code 77 is none of compute, int8");
  // The optimizer made by optimizer() above: the message names what made it.
  expect([&] { module.add_unit("late", unit_params(rng)); },
         "units must be added before the optimizer is made (by the first step(), "
         "save_checkpoint, load_checkpoint or optimizer())");
  optim::ZeroModule dry(world, {.dry_run = true});
  dry.add_unit("fc", unit_params(rng));
  expect([&] { dry.full_params(); }, "a dry run holds no values");
  expect([&] { dry.full_param("fc.weight"); }, "a dry run holds no values");
}

// f16's loss scaling takes GradScaler's settings (Note [Loss scale
// updates]); another dtype, which scales nothing, refuses them, and a bad
// one is named.
BOOST_AUTO_TEST_CASE(the_loss_scaler_takes_its_options) {
  std::mt19937 rng(
      static_cast<std::uint32_t>(test::test_seed("zero_module/the_loss_scaler_takes_its_options")));
  const CommPtr world = make_local_world(1).front();
  optim::ZeroModule module(
      world, {.dtype = DType::f16,
              .loss_scaler = optim::LossScalerOptions{.init_scale = 1024, .growth_interval = 2}});
  const auto unit = module.add_unit("fc", unit_params(rng));
  BOOST_TEST(module.loss_scale() == 1024);
  for (const double after : {1024, 2048, 2048, 4096}) {
    { auto scope = module.forward(unit); }
    {
      auto scope = module.backward(unit);
      scope.grad("weight").fill_(0.25);
      scope.grad("bias").fill_(-0.5);
    }
    BOOST_TEST(!module.step(1e-3).skipped);
    BOOST_TEST(module.loss_scale() == after);
  }
  test::expect_throw<InvalidArgument>(
      [&] {
        optim::ZeroModule(world, {.dtype = DType::bf16, .loss_scaler = optim::LossScalerOptions{}});
      },
      "ZeroModule: loss_scaler options with compute dtype bf16, which scales no loss (f16 only)");
  test::expect_throw<InvalidArgument>(
      [&] {
        optim::ZeroModule(world, {.dtype = DType::f16,
                                  .loss_scaler = optim::LossScalerOptions{.growth_factor = 1}});
      },
      "growth_factor must be > 1 (got 1)");
}

// A layer bound to param_views and read outside its unit's scopes is
// refused, also where the unit is gathered then (prefetched, or kept by
// grad-op and no-shard): such a read got the weights before a step under
// no-shard in 16 bits, and read a parameter whose gradient no scope takes
// (Note [Views live in their scopes]). Inside a scope it reads the current
// parameters.
BOOST_AUTO_TEST_CASE(a_view_outside_its_scopes_is_refused_under_every_strategy) {
  const auto seed = test::test_seed("zero_module/a_view_outside_its_scopes_is_refused");
  using optim::ShardingStrategy;
  for (const ShardingStrategy strategy :
       {ShardingStrategy::full_shard, ShardingStrategy::shard_grad_op, ShardingStrategy::no_shard,
        ShardingStrategy::hybrid_shard, ShardingStrategy::layer_zero})
    for (const DType dtype : {DType::f32, DType::bf16, DType::f16})
      run_local_ranks(2, [&](const CommPtr& world) {
        std::mt19937 rng(seed);  // the same initial values on every rank
        optim::ZeroModule module(world, {.strategy = strategy, .dtype = dtype});
        const auto unit = module.add_unit("fc", unit_params(rng));
        const auto views = module.param_views(unit, "weight");
        auto refused = [&](const Tensor& view, const char* when) {
          bool was = false;
          try {
            view.to_doubles();
          } catch (const InvalidState& e) {
            was = std::string(e.what()).find("outside its unit") != std::string::npos;
          }
          ZRT_EXPECT(was, "strategy ", optim::strategy_name(strategy), ", ", dtype_name(dtype),
                     ": ", view.name(), " was read ", when);
        };
        for (int step = 0; step < 2; ++step) {
          {
            const std::vector<double> now = module.full_param("fc.weight").to(dtype).to_doubles();
            auto scope = module.forward(unit);
            module.synchronize();
            ZRT_EXPECT(views.param.to_doubles() == now, "strategy ", optim::strategy_name(strategy),
                       ", ", dtype_name(dtype), ", step ", step,
                       ": the view in scope does not read the current weights");
            refused(views.grad, "in a forward scope");
          }
          refused(views.param, "after a forward scope");
          module.prefetch(unit);
          module.synchronize();
          refused(views.param, "prefetched");
          {
            auto scope = module.backward(unit);
            scope.grad("weight").fill_(0.5);
            scope.grad("bias").fill_(-0.25);
          }
          refused(views.param, "after a backward scope");
          refused(views.grad, "after a backward scope");
          module.step(0.1);
          refused(views.param, "after a step");
        }
      });
}

// Note [A scope outlives no module]: a class whose open scope is destroyed
// after its module (declared first) touches no freed memory (the ASan stage
// checks); the scope's close and views say what happened.
BOOST_AUTO_TEST_CASE(a_scope_left_open_outlives_its_module_safely) {
  const CommPtr world = make_local_world(1).front();
  std::mt19937 rng(test::test_seed("zero_module/a_scope_left_open_outlives_its_module_safely"));
  for (bool backward : {false, true}) {
    std::optional<optim::ZeroModule::Scope> scope;
    {
      optim::ZeroModule module(world);
      const auto unit = module.add_unit("fc", unit_params(rng));
      scope.emplace(backward ? module.backward(unit) : module.forward(unit));
    }
    const std::string what =
        backward ? "the backward scope of unit 'fc'" : "the forward scope of unit 'fc'";
    test::expect_throw<InvalidState>([&] { scope->param("weight"); },
                                     "'weight' of " + what + ", whose module was destroyed");
    test::expect_throw<InvalidState>([&] { scope->close(); },
                                     what + " was closed after its module was destroyed");
    scope->close();  // closed now: nothing more to do
    scope.reset();
  }
  {  // closed by its destructor: reported, not thrown
    std::optional<optim::ZeroModule::Scope> scope;
    {
      optim::ZeroModule module(world);
      scope.emplace(module.forward(module.add_unit("fc", unit_params(rng))));
    }
    scope.reset();
  }
  // A view kept from a scope, on ranks whose module owns its streams: read
  // after the module, refused; let go, it touches none of the module's
  // streams (it hung, or failed under ASan, returning its memory through them).
  const auto seed = test::test_seed("zero_module/a_view_kept_past_its_module");
  for (bool backward : {false, true})
    run_local_ranks(2, [&](const CommPtr& ranks) {
      std::mt19937 rank_rng(seed);
      std::optional<optim::ZeroModule::Scope> scope;
      Tensor kept;
      {
        optim::ZeroModule module(ranks, {.cpu_streams = optim::CpuStreams::all});
        scope.emplace(backward ? module.backward(module.add_unit("fc", unit_params(rank_rng)))
                               : module.forward(module.add_unit("fc", unit_params(rank_rng))));
        kept = backward ? scope->grad("weight") : scope->param("weight");
      }
      expect_invalid_state([&] { kept.to_doubles(); }, "a view read after its module");
      kept = Tensor();
      scope.reset();
    });
}

// Views from param_views kept past their module say whose they were, even
// read inside a scope of another module's unit of the same name.
BOOST_AUTO_TEST_CASE(a_view_of_a_destroyed_module_says_so) {
  const CommPtr world = make_local_world(1).front();
  std::mt19937 rng(test::test_seed("zero_module/a_view_of_a_destroyed_module_says_so"));
  optim::ZeroModule::ParamViews kept;
  {
    optim::ZeroModule module(world);
    kept = module.param_views(module.add_unit("fc", unit_params(rng)), "weight");
  }
  optim::ZeroModule other(world);
  auto scope = other.forward(other.add_unit("fc", unit_params(rng)));
  for (const Tensor& view : {kept.param, kept.grad})
    test::expect_throw<InvalidState>(
        [&] { view.to_doubles(); },
        "belongs to a ZeroModule that was destroyed (unit 'fc'): bind the layer to the "
        "param_views of the module it runs in");
}

// A unit name or a full parameter name given twice is refused, naming it:
// lookups and full_params() would otherwise see one of the two.
BOOST_AUTO_TEST_CASE(names_are_given_once) {
  const auto seed = test::test_seed("zero_module/names_are_given_once");
  std::mt19937 rng(seed);
  auto value = [&] {
    return Tensor::from_doubles({std::normal_distribution<double>()(rng)}, DType::f32);
  };
  auto refused = [](auto&& call, const std::string& part) {
    try {
      call();
    } catch (const InvalidArgument& e) {
      BOOST_TEST(std::string(e.what()).find(part) != std::string::npos, e.what());
      return;
    }
    BOOST_ERROR("accepted; expected an error naming " << part);
  };
  const CommPtr world = make_local_world(1).front();
  optim::ZeroModule module(world);
  module.add_unit("a", {{"b.c", value()}});
  refused([&] { module.add_unit("a", {{"d", value()}}); }, "a unit of that name");
  refused(
      [&] {
        module.add_unit("a.b", {{"c", value()}});
      },
      "parameter name 'a.b.c' is already a parameter's name in an earlier unit");
  refused(
      [&] {
        module.add_unit("e", {{"f", value()}, {"f", value()}});
      },
      "parameter name 'e.f' is given twice in this unit");
  refused(  // an integer buffer would be trained as floats
      [&] {
        module.add_unit("ids", {{"w", value()}, {"pos", Tensor::from_doubles({1, 2}, DType::i64)}});
      },
      "parameter 'ids.pos' is i64: parameters are floating point");
  // A checkpoint could not name them.
  refused([&] { module.add_unit("", {{"w", value()}}); }, "a unit needs a name");
  refused([&] { module.add_unit("g", {{"", value()}}); }, "has an empty name");
  module.add_unit("a.b2", {{"c", value()}});  // refused units left nothing behind
  BOOST_TEST(module.full_params().size() == 2u);
}

// Note [A unit belongs to its module]: the same place in another module is
// another unit, whose parameters would be used without a word.
BOOST_AUTO_TEST_CASE(a_unit_of_another_module_is_refused) {
  std::mt19937 rng(test::test_seed("zero_module/a_unit_of_another_module_is_refused"));
  auto refused = [](auto&& call, const std::string& part) {
    try {
      call();
    } catch (const InvalidArgument& e) {
      const std::string m = e.what();
      BOOST_TEST((m.find(part) != std::string::npos && m.find(".cpp") == std::string::npos), m);
      return;
    }
    BOOST_ERROR("accepted; expected an error naming " << part);
  };
  const CommPtr world = make_local_world(1).front();
  optim::ZeroModule a(world), b(world);
  const auto a0 = a.add_unit("a0", unit_params(rng));
  const auto a1 = a.add_unit("a1", unit_params(rng));
  const auto b0 = b.add_unit("b0", unit_params(rng));
  const auto b1 = b.add_unit("b1", unit_params(rng));
  BOOST_TEST((a1.index() == 1u && b1.index() == 1u && a1 == a1 && !(a1 == b1) && !(a0 == a1)));
  const std::string other = "a unit made by another ZeroModule's add_unit was given";
  refused([&] { b.forward(a1); }, "ZeroModule::forward: " + other);
  refused([&] { b.backward(a0); }, "ZeroModule::backward: " + other);
  refused([&] { b.prefetch(a1); }, "ZeroModule::prefetch: " + other);
  refused([&] { b.handle(a1); }, "ZeroModule::handle: " + other);
  refused([&] { b.param_views(a0, "weight"); }, "ZeroModule::param_views: " + other);
  refused([&] { b.forward(optim::ZeroModule::Unit()); },
          "ZeroModule::forward: a default-made ZeroModule::Unit was given");
  {
    auto scope = b.backward(b0);
    scope.grad("weight").fill_(0.5);
  }
  {
    auto scope = b.backward(b1);
    scope.grad("weight").fill_(0.25);
  }
  const std::vector<optim::ZeroModule::Unit> gather = {b1, a0};
  refused([&] { b.step(1e-3, {}, gather); }, "ZeroModule::step: " + other);
  b.step(1e-3, {}, std::vector<optim::ZeroModule::Unit>{b1});  // the refusal changed nothing
  BOOST_TEST(b.handle(b1).name() == "b1");
  BOOST_TEST((b.find_param("b1.weight")->unit == b1));
  // A module made later in the same memory is another module too.
  std::optional<optim::ZeroModule> reused;
  reused.emplace(world);
  const auto old = reused->add_unit("old", unit_params(rng));
  reused.reset();
  reused.emplace(world);
  reused->add_unit("new", unit_params(rng));
  refused([&] { reused->forward(old); },
          "ZeroModule::forward: a unit of a ZeroModule destroyed since was given");
  BOOST_TEST((b.unit(1) == b1 && !(b.unit(0) == b1)));
  refused([&] { b.unit(2); }, "ZeroModule::unit: no unit 2 (2 units)");
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

// One buffer reused for a later unit's values after the first took it is no
// tie: refused, naming both parameters, instead of the later values dropped.
BOOST_AUTO_TEST_CASE(a_buffer_changed_since_its_unit_is_no_tie) {
  const CommPtr world = make_local_world(1).front();
  std::mt19937 rng(test::test_seed("zero_module/a_buffer_changed_since_its_unit_is_no_tie"));
  optim::ZeroModule module(world);
  Tensor buffer = Tensor::full({3, 5}, 1.0, DType::f32);
  module.add_unit("a", {{"w", buffer}});
  buffer.fill_(2.0);  // the next unit's values, in the same buffer
  auto b = unit_params(rng);
  b.push_back({"w", buffer});
  test::expect_throw<InvalidArgument>(
      [&] { module.add_unit("b", b); },
      "ZeroModule::add_unit('b'): parameter 'b.w' is the buffer of parameter 'a.w' of unit 'a', "
      "so it would be tied to it, but its values changed since");
  buffer.fill_(1.0);  // unchanged again: the tie it means
  module.add_unit("c", {{"own", Tensor::full({2}, 0.5, DType::f32)}, {"w", buffer}});
  BOOST_TEST(module.find_param("c.w")->unit.index() == 0u);
  // Found on one rank of two (each has its own buffer): both refuse it.
  std::vector<std::string> errors(2);
  run_local_ranks(2, [&](const CommPtr& comm) {
    optim::ZeroModule m(comm);
    Tensor mine = Tensor::full({3, 5}, 1.0, DType::f32);
    m.add_unit("a", {{"w", mine}});
    if (comm->rank() == 1) mine.fill_(2.0);
    try {
      m.add_unit("b", {{"own", Tensor::full({2}, 0.5, DType::f32)}, {"w", mine}});
    } catch (const InvalidArgument& e) {
      errors[static_cast<std::size_t>(comm->rank())] = e.what();
    }
  });
  for (const std::string& error : errors)
    BOOST_TEST(error.find("add_unit('b'): on rank 1, parameter 'b.w' is the buffer of parameter "
                          "'a.w'") != std::string::npos,
               error);
}

// A unit one rank alone refuses (a repeated unit or parameter name, an
// integer buffer, a partial tie, only ties) is refused by every rank in that rank's words: with MPI or
// NCCL the others would otherwise wait in add_unit's collective for the
// timeout (a short one here, so that a rank left waiting fails the test).
BOOST_AUTO_TEST_CASE(a_unit_one_rank_refuses_is_refused_by_every_rank) {
  struct Case {
    std::function<std::vector<std::pair<std::string, Tensor>>(Tensor&)> rank2_params;
    std::string expected;
    std::string rank2_unit = "b";
  };
  const std::vector<Case> cases = {
      {[](Tensor&) {
         return std::vector<std::pair<std::string, Tensor>>{
             {"v", Tensor::full({3, 5}, 0.5, DType::f32)}};
       },
       "on rank 2, a unit of that name was added before", "a"},
      {[](Tensor& w) {
         return std::vector<std::pair<std::string, Tensor>>{{"w", w}};
       },
       "on rank 2, every parameter is tied to an earlier unit's"},
      {[](Tensor& w) {
         return std::vector<std::pair<std::string, Tensor>>{{"w", w.clone()}, {"w", w.clone()}};
       },
       "on rank 2, parameter name 'b.w' is given twice in this unit"},
      {[](Tensor& w) {
         return std::vector<std::pair<std::string, Tensor>>{
             {"w", w.clone()}, {"steps", Tensor::full({2}, 3.0, DType::i32)}};
       },
       "on rank 2, parameter 'b.steps' is i32: parameters are floating point"},
      {[](Tensor& w) {
         return std::vector<std::pair<std::string, Tensor>>{{"w", w.narrow(1, 2)}};
       },
       "on rank 2, parameter 'b.w' shares part of its memory with parameter 'a.w'"}};
  for (const Case& c : cases) {
    std::vector<std::string> errors(3);
    run_local_ranks(
        3,
        [&](const CommPtr& world) {
          optim::ZeroModule module(world);
          Tensor a = Tensor::full({3, 5}, 0.25, DType::f32);
          module.add_unit("a", {{"w", a}});
          try {
            if (world->rank() == 2)
              module.add_unit(c.rank2_unit, c.rank2_params(a));
            else
              module.add_unit("b", {{"w", Tensor::full({3, 5}, 0.5, DType::f32)}});
          } catch (const Error& e) {
            errors[static_cast<std::size_t>(world->rank())] = e.what();
          }
        },
        std::chrono::seconds(5));
    for (std::size_t r = 0; r < errors.size(); ++r)
      BOOST_TEST(
          errors[r].find(detail::concat("ZeroModule::add_unit('", r == 2 ? c.rank2_unit : "b",
                                        "'): ", c.expected)) != std::string::npos,
          errors[r]);
  }
}

// ZeroModuleOptions::host_allocator must be host memory (Note [Host memory in the plan]).
BOOST_AUTO_TEST_CASE(a_host_allocator_of_a_device_is_refused) {
  struct DeviceMemory final : Allocator {
    void* allocate(std::size_t, Stream) override { return nullptr; }
    void deallocate(void*) noexcept override {}
    Device device() const override { return Device::cuda(0); }
  };
  optim::ZeroModuleOptions o;
  o.host_allocator = std::make_shared<DeviceMemory>();
  try {
    optim::ZeroModule module(make_local_world(1)[0], o);
    BOOST_FAIL("a host_allocator for cuda:0 was accepted");
  } catch (const InvalidArgument& e) {
    BOOST_TEST(std::string(e.what()).find("host_allocator is for cuda:0") != std::string::npos,
               e.what());
  }
}

// Note [The stream a scope serves]: a program that passes no stream anywhere
// (kernels on the calling thread, a host read of the output) trains the same
// numbers in every mode of Note [Streams of a CPU module], as do programs
// that run on the module's compute stream or a stream of their own and say
// so. Every block is poisoned, so a read that is not ordered after the
// gather or the zeroing of the gradients reads NaN.
BOOST_AUTO_TEST_CASE(scopes_order_the_callers_stream_in_every_mode) {
  const auto seed = test::test_seed("zero_module/scopes_order_the_callers_stream_in_every_mode");
  enum class Caller { calling_thread, compute_stream, own_stream };
  const char* caller_names[] = {"the calling thread", "the compute stream", "a stream of its own"};
  struct Run {
    optim::CpuStreams mode;
    Caller caller;
  };
  const std::vector<Run> runs = {{optim::CpuStreams::none, Caller::calling_thread},
                                 {optim::CpuStreams::comm, Caller::calling_thread},
                                 {optim::CpuStreams::all, Caller::calling_thread},
                                 {optim::CpuStreams::all, Caller::compute_stream},
                                 {optim::CpuStreams::all, Caller::own_stream},
                                 {optim::CpuStreams::comm, Caller::own_stream}};
  std::vector<std::vector<double>> results(runs.size());  // rank 0's losses, then weights
  for (std::size_t r = 0; r < runs.size(); ++r)
    run_local_ranks(2, [&](const CommPtr& world) {
      std::mt19937 rng(seed);  // the same initial weights on every rank
      auto normal = [&](std::mt19937& g, const Shape& shape, double scale) {
        std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
        for (auto& x : v) x = scale * std::normal_distribution<double>()(g);
        return Tensor::from_doubles(v, DType::f32, Device::cpu(), shape);
      };
      const Tensor w1 = normal(rng, {7, 5}, 0.4), w2 = normal(rng, {3, 7}, 0.4);
      std::mt19937 rank_rng(seed + 1 + static_cast<unsigned>(world->rank()));
      const Tensor x = normal(rank_rng, {4, 5}, 1.0), dy = normal(rank_rng, {4, 3}, 1.0);

      optim::ZeroModuleOptions options;
      options.cpu_streams = runs[r].mode;
      options.allocator = make_caching_allocator(Device::cpu(), {.poison = true});
      optim::ZeroModule m(world, options);
      const auto fc1 = m.add_unit("fc1", {{"weight", w1}});
      const auto fc2 = m.add_unit("fc2", {{"weight", w2}});
      std::optional<OwnedStream> own;
      if (runs[r].caller == Caller::own_stream) own.emplace(Device::cpu());
      const Stream s = runs[r].caller == Caller::calling_thread   ? Stream()
                       : runs[r].caller == Caller::compute_stream ? m.stream()
                                                                  : own->get();
      auto activation = [&](const Shape& shape) {
        return Tensor::empty(shape, DType::f32, Device::cpu(), m.allocator(), s);
      };
      std::vector<double> out;
      for (int step = 0; step < 3; ++step) {
        Tensor h = activation({4, 7}), y = activation({4, 3}), dh = activation({4, 7});
        {
          auto scope = m.forward(fc1, s);
          kernels::gemm(x, false, scope.param("weight"), true, h, 1.0, 0.0, s);
        }
        {
          auto scope = m.forward(fc2, s);
          kernels::gemm(h, false, scope.param("weight"), true, y, 1.0, 0.0, s);
        }
        s.synchronize();  // the host reads y
        const auto yv = y.to_doubles(), dyv = dy.to_doubles();
        double loss = 0;
        for (std::size_t i = 0; i < yv.size(); ++i) loss += yv[i] * dyv[i];
        out.push_back(loss);
        {
          auto scope = m.backward(fc2, /*sync=*/true, s);
          kernels::gemm(dy, true, h, false, scope.grad("weight"), 1.0, 1.0, s);
          kernels::gemm(dy, false, scope.param("weight"), false, dh, 1.0, 0.0, s);
        }
        {
          auto scope = m.backward(fc1, /*sync=*/true, s);
          kernels::gemm(dh, true, x, false, scope.grad("weight"), 1.0, 1.0, s);
        }
        m.step(1e-2);
      }
      for (const auto& [name, value] : m.full_params())
        for (double v : value.to_doubles()) out.push_back(v);
      if (world->rank() == 0) results[r] = out;
    });
  for (std::size_t r = 0; r < runs.size(); ++r) {
    BOOST_TEST_CONTEXT("ZRT_CPU_STREAMS=" << optim::cpu_streams_name(runs[r].mode)
                                          << ", kernels on "
                                          << caller_names[static_cast<int>(runs[r].caller)]) {
      BOOST_REQUIRE_EQUAL(results[r].size(), results[0].size());
      for (std::size_t i = 0; i < results[r].size(); ++i) {
        BOOST_TEST_CONTEXT("value " << i) { BOOST_TEST(results[r][i] == results[0][i]); }
      }
    }
  }
  for (double v : results[0]) BOOST_TEST(std::isfinite(v));
}

BOOST_AUTO_TEST_SUITE_END()
