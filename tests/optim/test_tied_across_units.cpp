// A parameter tied across wrap units through ZeroModule's scopes (Note
// [Parameters tied across units]): an embedding-like weight E in unit
// "embed" is the head's weight in unit "head". A few AdamW steps on 1 to 4
// local ranks, with odd sizes so the shards are uneven and E does not divide
// by the world size, match a float64 reference of the same model; every
// rank's shard of E moves (the FSDP failure: the last rank's shard of a tied
// weight never updates). Plus the order and overlap errors.
//
// The model, per row with token t and target y [V]:
//   h = E[t] + a;  z = g ⊙ h;  logit = E z;  loss = ½ Σ_v (logit_v − y_v)²
// averaged over the rank's rows (two micro-batches); gradients are averaged
// over the ranks. Unit "embed" = {a [C], E [V, C]}, unit "head" = {g [C],
// E again as "weight"}.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <random>

#include "tests/support/rank_check.h"
#include "tests/support/test_seed.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;

namespace {

constexpr int kRows = 3;  // per micro-batch per rank
constexpr int kMicroBatches = 2;
constexpr int kSteps = 3;
constexpr double kLr = 1e-2;
constexpr double kWeightDecay = 0.1;  // E decays (a matrix); a and g do not

struct Dims {
  int V, C;
};

struct Rows {
  std::vector<int> token;  // [kRows]
  std::vector<double> y;   // [kRows, V]
};

// data[step][rank][micro-batch]
using Data = std::vector<std::vector<std::vector<Rows>>>;

Data make_data(const Dims& d, int world, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> token(0, d.V - 1);
  std::normal_distribution<double> normal;
  Data data(kSteps, std::vector<std::vector<Rows>>(static_cast<std::size_t>(world),
                                                   std::vector<Rows>(kMicroBatches)));
  for (auto& step : data)
    for (auto& rank : step)
      for (Rows& rows : rank) {
        for (int n = 0; n < kRows; ++n) rows.token.push_back(token(rng));
        for (int k = 0; k < kRows * d.V; ++k) rows.y.push_back(normal(rng));
      }
  return data;
}

struct Params {
  std::vector<double> a, E, g;  // [C], [V, C], [C]
};

Params make_params(const Dims& d, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Params p;
  for (int c = 0; c < d.C; ++c) p.a.push_back(0.5 * normal(rng));
  for (int k = 0; k < d.V * d.C; ++k) p.E.push_back(normal(rng));
  for (int c = 0; c < d.C; ++c) p.g.push_back(1.0 + 0.1 * normal(rng));
  return p;
}

// --- the float64 reference --------------------------------------------------

struct Adam {
  std::vector<double> m, v;
  // torch.optim.AdamW's update (Note [AdamW order of operations]), in double.
  void step(std::vector<double>& p, const std::vector<double>& grad, int t, bool decays) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (decays) p[i] *= 1.0 - kLr * kWeightDecay;
      m[i] = b1 * m[i] + (1 - b1) * grad[i];
      v[i] = b2 * v[i] + (1 - b2) * grad[i] * grad[i];
      const double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[i] -= kLr / (1 - std::pow(b1, t)) * m[i] / denom;
    }
  }
};

// The parameters after every step, and each step's loss averaged over ranks.
struct Reference {
  std::vector<double> losses;
  Params final_params;
};

Reference reference(const Dims& d, Params p, const Data& data) {
  const auto V = static_cast<std::size_t>(d.V), C = static_cast<std::size_t>(d.C);
  const double world = static_cast<double>(data.front().size());
  const double norm = kRows * kMicroBatches;  // each rank's loss is a mean over its rows
  Adam adam_a, adam_E, adam_g;
  Reference out;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<double> da(C, 0.0), dE(V * C, 0.0), dg(C, 0.0);
    double loss = 0;
    for (const auto& rank : data[static_cast<std::size_t>(s)])
      for (const Rows& rows : rank)
        for (int n = 0; n < kRows; ++n) {
          const auto t = static_cast<std::size_t>(rows.token[static_cast<std::size_t>(n)]);
          std::vector<double> h(C), z(C), dl(V), dz(C, 0.0);
          for (std::size_t c = 0; c < C; ++c) {
            h[c] = p.E[t * C + c] + p.a[c];
            z[c] = p.g[c] * h[c];
          }
          for (std::size_t v = 0; v < V; ++v) {
            double logit = 0;
            for (std::size_t c = 0; c < C; ++c) logit += p.E[v * C + c] * z[c];
            const double r = logit - rows.y[static_cast<std::size_t>(n) * V + v];
            loss += 0.5 * r * r / norm / world;
            dl[v] = r / norm / world;  // the average over ranks of each rank's mean
          }
          for (std::size_t v = 0; v < V; ++v)
            for (std::size_t c = 0; c < C; ++c) {
              dE[v * C + c] += dl[v] * z[c];  // the head's use
              dz[c] += dl[v] * p.E[v * C + c];
            }
          for (std::size_t c = 0; c < C; ++c) {
            dg[c] += dz[c] * h[c];
            const double dh = dz[c] * p.g[c];
            dE[t * C + c] += dh;  // the embedding's use
            da[c] += dh;
          }
        }
    out.losses.push_back(loss);
    adam_a.step(p.a, da, s + 1, false);
    adam_E.step(p.E, dE, s + 1, true);
    adam_g.step(p.g, dg, s + 1, false);
  }
  out.final_params = p;
  return out;
}

// --- the same model on ZeroModule scopes, in fp32 -------------------------

struct Config {
  optim::ShardingStrategy strategy = optim::ShardingStrategy::full_shard;
  int zero3_size = 0;
  bool offload_grads = false;
  optim::CpuStreams cpu_streams = optim::CpuStreams::comm;
};

std::string describe(const Dims& d, int world, const Config& c) {
  return detail::concat("V=", d.V, " C=", d.C, ", ", world, " ranks, ",
                        optim::strategy_name(c.strategy),
                        c.zero3_size ? detail::concat(" zero3 ", c.zero3_size) : std::string(),
                        c.offload_grads ? ", offloaded gradients" : "", ", cpu streams ",
                        optim::cpu_streams_name(c.cpu_streams));
}

Tensor tensor_of(const std::vector<double>& v, const Shape& shape) {
  return Tensor::from_doubles(v, DType::f32, Device::cpu(), shape);
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> out;
  for (double x : t.to_doubles()) out.push_back(static_cast<float>(x));
  return out;
}

// One rank's run; checks its results against `ref` and throws CheckFailed.
void train_rank(const CommPtr& world, const Dims& d, const Params& init, const Data& data,
                const Config& cfg, const Reference& ref, const std::string& what) {
  optim::ZeroModuleOptions o;
  o.strategy = cfg.strategy;
  o.zero3_size = cfg.zero3_size;
  o.grad_reduce.offload = cfg.offload_grads;
  o.cpu_streams = cfg.cpu_streams;
  o.adamw.weight_decay = kWeightDecay;
  optim::ZeroModule module(world, o);
  const Tensor E = tensor_of(init.E, {d.V, d.C});
  // E comes after a, so that with uneven shards it reaches into the last rank's.
  const auto embed = module.add_unit("embed", {{"bias", tensor_of(init.a, {d.C})}, {"weight", E}});
  const auto head = module.add_unit("head", {{"gain", tensor_of(init.g, {d.C})}, {"weight", E}});

  const auto tied = module.tied_params();
  ZRT_EXPECT(tied.size() == 1 && tied[0].user == head && tied[0].fqn == "head.weight" &&
                 tied[0].owner.unit == embed &&
                 module.handle(embed).fqn(tied[0].owner.index) == "embed.weight",
             what, ": the tie was not recorded as head.weight -> embed.weight");
  ZRT_EXPECT(module.handle(head).num_params() == 1, what,
             ": the head's flat parameter holds the tied weight");
  const std::size_t e_index = tied[0].owner.index;
  const std::vector<double> shard_before = module.handle(embed).sharded_param(e_index).to_doubles();

  const auto V = static_cast<std::size_t>(d.V), C = static_cast<std::size_t>(d.C);
  const double norm = kRows * kMicroBatches;
  const auto rank = static_cast<std::size_t>(world->rank());
  for (int s = 0; s < kSteps; ++s) {
    double loss = 0;
    for (int mb = 0; mb < kMicroBatches; ++mb) {
      const Rows& rows = data[static_cast<std::size_t>(s)][rank][static_cast<std::size_t>(mb)];
      const bool sync = mb + 1 == kMicroBatches;
      std::vector<float> h(kRows * C), z(kRows * C), dh(kRows * C);
      {
        auto scope = module.forward(embed);
        module.synchronize();  // the host reads what the module's streams gathered
        const auto a = floats(scope.param("bias")), e = floats(scope.param("weight"));
        for (std::size_t n = 0; n < kRows; ++n)
          for (std::size_t c = 0; c < C; ++c)
            h[n * C + c] = e[static_cast<std::size_t>(rows.token[n]) * C + c] + a[c];
      }
      std::vector<float> dl(kRows * V);
      {
        auto scope = module.forward(head);
        module.synchronize();
        const auto g = floats(scope.param("gain")),
                   e = floats(scope.param("weight"));  // the owner's view
        for (std::size_t n = 0; n < kRows; ++n) {
          for (std::size_t c = 0; c < C; ++c) z[n * C + c] = g[c] * h[n * C + c];
          for (std::size_t v = 0; v < V; ++v) {
            float logit = 0;
            for (std::size_t c = 0; c < C; ++c) logit += e[v * C + c] * z[n * C + c];
            const float r = logit - static_cast<float>(rows.y[n * V + v]);
            loss += 0.5 * r * r / norm;
            dl[n * V + v] = r / static_cast<float>(norm);
          }
        }
      }
      {
        auto scope = module.backward(head, sync);
        module.synchronize();  // the zeroed gradients are ready to be written on the host
        const auto g = floats(scope.param("gain")), e = floats(scope.param("weight"));
        float* dg = scope.grad("gain").data<float>();
        float* dE = scope.grad("weight").data<float>();  // the tie's own gradient
        for (std::size_t n = 0; n < kRows; ++n)
          for (std::size_t c = 0; c < C; ++c) {
            float dz = 0;
            for (std::size_t v = 0; v < V; ++v) {
              dE[v * C + c] += dl[n * V + v] * z[n * C + c];
              dz += dl[n * V + v] * e[v * C + c];
            }
            dg[c] += dz * h[n * C + c];
            dh[n * C + c] = dz * g[c];
          }
      }
      {
        auto scope = module.backward(embed, sync);
        module.synchronize();
        float* da = scope.grad("bias").data<float>();
        float* dE = scope.grad("weight").data<float>();
        for (std::size_t n = 0; n < kRows; ++n)
          for (std::size_t c = 0; c < C; ++c) {
            dE[static_cast<std::size_t>(rows.token[n]) * C + c] += dh[n * C + c];
            da[c] += dh[n * C + c];
          }
      }
    }
    // The loss averaged over the ranks, as the reference has it.
    Tensor sum = Tensor::from_doubles({loss}, DType::f64);
    world->all_reduce(sum, ReduceOp::avg, Stream());
    const double want = ref.losses[static_cast<std::size_t>(s)];
    ZRT_EXPECT(std::abs(sum.item(0) - want) <= 1e-5 * std::abs(want), what, ": loss of step ", s,
               " is ", sum.item(0), ", the float64 reference ", want);
    module.step(kLr);
  }
  module.synchronize();

  // Every rank's shard of E moved, the last rank's included.
  const std::vector<double> shard_after = module.handle(embed).sharded_param(e_index).to_doubles();
  for (std::size_t i = 0; i < shard_after.size(); ++i)
    ZRT_EXPECT(shard_after[i] != shard_before[i], what, ": element ", i, " of rank ", world->rank(),
               "'s shard of the tied weight never updated");

  // One tensor, under the owner's name, equal to the float64 reference.
  const auto all = module.full_params();
  ZRT_EXPECT(all.size() == 3 && all.count("embed.weight") && all.count("embed.bias") &&
                 all.count("head.gain"),
             what, ": full_params() should hold embed.bias, embed.weight and head.gain once each");
  const double tol = 2e-5;  // fp32 compute over 3 steps of parameters O(1), each moved ~lr per step
  auto compare = [&](const std::string& name, const std::vector<double>& want) {
    const std::vector<double> got = all.at(name).to_doubles();
    for (std::size_t i = 0; i < want.size(); ++i)
      ZRT_EXPECT(std::abs(got[i] - want[i]) <= tol, what, ": ", name, "[", i, "] is ", got[i],
                 ", the float64 reference ", want[i], " (tolerance ", tol, ")");
  };
  compare("embed.weight", ref.final_params.E);
  compare("embed.bias", ref.final_params.a);
  compare("head.gain", ref.final_params.g);
  ZRT_EXPECT(module.full_param("head.weight").to_doubles() == all.at("embed.weight").to_doubles(),
             what, ": full_param of the tied name is not the owner's parameter");
  const auto at = module.find_param("head.weight");
  ZRT_EXPECT(at && at->unit == embed && at->index == e_index, what,
             ": find_param of the tied name");
}

void check(const Dims& d, int world, const Config& cfg, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const Params init = make_params(d, rng);
  const Data data = make_data(d, world, rng);
  const Reference ref = reference(d, init, data);
  const std::string what = describe(d, world, cfg);
  try {
    run_local_ranks(world, [&](const CommPtr& w) { train_rank(w, d, init, data, cfg, ref, what); });
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

template <class F>
std::string invalid_state_message(F&& call) {
  try {
    call();
  } catch (const InvalidState& e) {
    return e.what();
  }
  return "<no InvalidState>";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tied_across_units)

BOOST_AUTO_TEST_CASE(trains_as_the_float64_reference) {
  const auto seed = test::test_seed("tied_across_units/trains_as_the_float64_reference");
  using S = optim::ShardingStrategy;
  // E of 15 elements (not divisible by 2 or 4; with a, 18 over 4 ranks is
  // uneven), and of 3 (fewer than 4 ranks: some hold none of it).
  for (const Dims d : {Dims{5, 3}, Dims{1, 3}})
    for (int world = 1; world <= 4; ++world)
      for (const S s : {S::full_shard, S::shard_grad_op, S::no_shard})
        check(d, world, {.strategy = s}, seed);
  check({5, 3}, 4, {.strategy = S::hybrid_shard, .zero3_size = 2}, seed);
  check({5, 3}, 3, {.offload_grads = true}, seed);
  check({5, 3}, 3, {.cpu_streams = optim::CpuStreams::all}, seed);
  check({5, 3}, 2, {.cpu_streams = optim::CpuStreams::none}, seed);
}

// The owner's backward must come after its users': a user's backward after
// the owner synced would miss the step, and a step with an owner holding
// tie gradients that it never reduced would drop them. A second scope of an
// open unit leaves the first one's tie gradient alone.
BOOST_AUTO_TEST_CASE(the_owner_reduces_after_its_users) {
  std::mt19937_64 rng(3);
  const Params init = make_params({5, 3}, rng);
  try {
    run_local_ranks(2, [&](const CommPtr& world) {
      optim::ZeroModule module(world);
      const Tensor E = tensor_of(init.E, {5, 3});
      const auto embed =
          module.add_unit("embed", {{"bias", tensor_of(init.a, {3})}, {"weight", E}});
      const auto head = module.add_unit("head", {{"gain", tensor_of(init.g, {3})}, {"weight", E}});
      {
        auto outer = module.backward(head);
        const std::string nested = invalid_state_message([&] { module.backward(head); });
        ZRT_EXPECT(nested.find("a scope of it is open") != std::string::npos,
                   "a nested scope of one unit: '", nested, "'");
        // The owner is open for its user's scope: the messages say whose.
        const std::string owner = invalid_state_message([&] { module.forward(embed); });
        ZRT_EXPECT(owner.find("scope of unit 'embed' opened while a scope of it is open (its "
                              "own, or one of a unit that uses its parameters: 'head')") !=
                       std::string::npos,
                   "the owner's scope inside its user's: '", owner, "'");
        const std::string step = invalid_state_message([&] { module.step(kLr); });
        ZRT_EXPECT(step.find("unit 'embed' has a forward scope open (its own, or one of a unit "
                             "that uses its parameters: 'head')") != std::string::npos,
                   "a step inside a user's scope: '", step, "'");
        module.synchronize();
        outer.grad("weight").data<float>()[0] +=
            1.0f;  // the outer scope's tie gradient is still there
      }
      { auto scope = module.backward(embed); }
      module.step(kLr);

      { auto scope = module.backward(embed); }
      const std::string late = invalid_state_message([&] { module.backward(head); });
      ZRT_EXPECT(late.find("'head'") != std::string::npos &&
                     late.find("'embed'") != std::string::npos &&
                     late.find("embed.weight") != std::string::npos,
                 "a user's backward after the owner's sync: '", late, "'");
      module.step(kLr);  // the owner's own gradients are fine

      { auto scope = module.backward(head); }  // syncs the head's own, adds to the owner's
      const std::string unreduced = invalid_state_message([&] { module.step(kLr); });
      ZRT_EXPECT(unreduced.find("'embed'") != std::string::npos,
                 "a step over unreduced tie gradients: '", unreduced, "'");
      { auto scope = module.backward(embed); }
      module.step(kLr);
    });
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

// A user's scope opened inside its owner's uses the owner's parameter as
// it is: it reads it there under every strategy, and the owner's scope
// closing first is refused, naming the user, since the parameter has no
// memory after it (Note [Views live in their scopes]). Both still close,
// and the module trains on.
BOOST_AUTO_TEST_CASE(a_users_scope_inside_its_owners_closes_first) {
  std::mt19937_64 rng(test::test_seed("tied_across_units/a_users_scope_inside_its_owners"));
  const Params init = make_params({5, 3}, rng);
  using S = optim::ShardingStrategy;
  for (const S strategy : {S::full_shard, S::shard_grad_op, S::no_shard})
    run_local_ranks(2, [&](const CommPtr& world) {
      optim::ZeroModule module(world, {.strategy = strategy});
      const Tensor E = tensor_of(init.E, {5, 3});
      const auto embed =
          module.add_unit("embed", {{"bias", tensor_of(init.a, {3})}, {"weight", E}});
      const auto head = module.add_unit("head", {{"gain", tensor_of(init.g, {3})}, {"weight", E}});
      const auto head2 =
          module.add_unit("head2", {{"weight", E}, {"gain", tensor_of(init.g, {3})}});
      const std::string at = std::string("strategy ") + optim::strategy_name(strategy);
      for (const bool backward : {false, true}) {
        auto owner = backward ? module.backward(embed, false) : module.forward(embed);
        {
          auto user = backward ? module.backward(head, false) : module.forward(head);
          module.synchronize();
          ZRT_EXPECT(user.param("weight").to_doubles() == owner.param("weight").to_doubles(), at,
                     ": the user's scope inside its owner's reads another parameter");
        }
        std::optional<optim::ZeroModule::Scope> user(backward ? module.backward(head, false)
                                                              : module.forward(head));
        const std::string early = invalid_state_message([&] { owner.close(); });
        ZRT_EXPECT(early.find(std::string("the ") + (backward ? "backward" : "forward") +
                              " scope of unit 'embed' closed before the scope of unit 'head', "
                              "opened inside it, that uses the parameters of unit 'embed' tied: "
                              "close that scope first") != std::string::npos,
                   at, ": the owner's scope closing first: '", early, "'");
        user.reset();
      }
      // The same where a user's scope holds the owner open for another user.
      {
        std::optional<optim::ZeroModule::Scope> first(module.forward(head));
        auto second = module.forward(head2);
        const std::string early = invalid_state_message([&] { first->close(); });
        ZRT_EXPECT(early.find("the forward scope of unit 'head' closed before the scope of unit "
                              "'head2', opened inside it, that uses the parameters of unit "
                              "'embed' tied") != std::string::npos,
                   at, ": a user's scope holding the owner closing first: '", early, "'");
      }
      // Nothing of those holds is left: the owner's own scope closes cleanly.
      { auto scope = module.forward(embed); }
      { auto scope = module.backward(head2); }
      { auto scope = module.backward(head); }
      { auto scope = module.backward(embed); }
      module.step(kLr);
    });
}

BOOST_AUTO_TEST_CASE(offloaded_owner_gradients_stay_on_the_host_between_uses) {
  // With offload_grads the owner's fp32 gradient is on the device only while
  // gradients are added to it: a user's tie gradient goes in and the sum goes
  // back to host memory, as the owner's own accumulating backward leaves it.
  std::mt19937_64 rng(5);
  const Params init = make_params({5, 3}, rng);
  try {
    run_local_ranks(2, [&](const CommPtr& world) {
      optim::ZeroModuleOptions options;
      options.grad_reduce.offload = true;
      optim::ZeroModule module(world, options);
      const Tensor E = tensor_of(init.E, {5, 3});
      const auto embed =
          module.add_unit("embed", {{"bias", tensor_of(init.a, {3})}, {"weight", E}});
      const auto head = module.add_unit("head", {{"gain", tensor_of(init.g, {3})}, {"weight", E}});
      for (int micro = 0; micro < 2; ++micro) {
        const bool last = micro == 1;
        {
          auto scope = module.backward(head, last);
          module.synchronize();
          scope.grad("weight").data<float>()[0] += 1.0f;
        }
        ZRT_EXPECT(
            module.handle(embed).full_prec_grad_padded().is_freed(),
            "the owner's fp32 gradient stays on the device after a user's backward (micro-batch ",
            micro, ")");
        { auto scope = module.backward(embed, last); }
      }
      module.step(kLr);
    });
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

BOOST_AUTO_TEST_CASE(only_whole_tensors_tie) {
  std::mt19937_64 rng(5);
  const Params init = make_params({5, 3}, rng);
  try {
    run_local_ranks(2, [&](const CommPtr& world) {
      optim::ZeroModule module(world);
      const Tensor E = tensor_of(init.E, {5, 3});
      module.add_unit("embed", {{"weight", E}});
      std::string overlap;
      try {
        module.add_unit("head", {{"rows", E.flatten().slice(3, 6).view({2, 3})}});
      } catch (const InvalidArgument& e) {
        overlap = e.what();
      }
      ZRT_EXPECT(
          overlap.find("'head.rows' shares part of its memory with parameter 'embed.weight'") !=
              std::string::npos,
          "a partial overlap was not refused: '", overlap, "'");
      std::string all_tied;
      try {
        module.add_unit("head", {{"weight", E}});
      } catch (const InvalidArgument& e) {
        all_tied = e.what();
      }
      ZRT_EXPECT(all_tied.find("every parameter is tied") != std::string::npos,
                 "a unit of tied parameters only was not refused: '", all_tied, "'");
      module.add_unit("head",
                      {{"gain", tensor_of(init.g, {3})}, {"weight", E}});  // and now it ties
      ZRT_EXPECT(module.tied_params().size() == 1, "the tie was not recorded");
      // Inside one unit too: a view in another shape, or a slice, of a
      // parameter is refused; the same tensor twice is one parameter.
      const Tensor X = tensor_of(init.E, {5, 3});
      for (const Tensor& alias : {X.view({15}), X.flatten().slice(0, 6).view({2, 3})}) {
        std::string inside;
        try {
          module.add_unit("inside", {{"w", X}, {"alias", alias}});
        } catch (const InvalidArgument& e) {
          inside = e.what();
        }
        ZRT_EXPECT(inside.find("'inside.alias' shares part of its memory with parameter "
                               "'inside.w' of this unit") != std::string::npos,
                   "memory shared inside a unit was not refused: '", inside, "'");
      }
      module.add_unit("inside", {{"w", X}, {"again", X}});
      ZRT_EXPECT(module.find_param("inside.again").has_value(), "the second name was lost");
    });
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

// Finding ties compares a parameter only with those sharing its storage:
// adding many untied units compares nothing, so it stays linear in the units.
BOOST_AUTO_TEST_CASE(finding_ties_is_linear_in_the_units) {
  std::mt19937_64 rng(6);
  const Params init = make_params({5, 3}, rng);
  try {
    run_local_ranks(1, [&](const CommPtr& world) {
      optim::ZeroModule module(world);
      const Tensor E = tensor_of(init.E, {5, 3});
      module.add_unit("embed", {{"weight", E}});
      for (int u = 0; u < 300; ++u)
        module.add_unit("h" + std::to_string(u), {{"gain", tensor_of(init.g, {3})}});
      ZRT_EXPECT(module.tie_candidates_checked() == 0, "300 untied units compared ",
                 module.tie_candidates_checked(), " earlier parameters");
      module.add_unit("head", {{"gain", tensor_of(init.g, {3})}, {"weight", E}});
      ZRT_EXPECT(module.tie_candidates_checked() == 1, "a tie compared ",
                 module.tie_candidates_checked(),
                 " earlier parameters, not the one it shares with");
      ZRT_EXPECT(module.tied_params().size() == 1, "the tie was not recorded");
    });
  } catch (const std::exception& e) {
    BOOST_ERROR(e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
