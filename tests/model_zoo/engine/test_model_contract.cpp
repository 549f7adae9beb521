// A model of an embedder's own drives TrainingEngine through the Model
// interface: what it says of its stages, and what its stages return, is
// checked in its terms. A wrong stage_unit or block_stages() would index past
// the engine's tables; a unit no stage uses would only decay; a loss or a
// stage's input gradient of the wrong shape, or ranks with different
// normalisers, would train on wrong numbers without a word.
#include <boost/test/unit_test.hpp>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/support/rank_check.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/engine/training_engine.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace zrt::model_zoo;

namespace {

enum class Fault {
  none,
  stage_unit_past_the_units,
  stage_unit_negative,
  unit_of_no_stage,
  block_past_the_stages,
  loss_of_two_elements,
  input_gradient_too_wide,
  lookup_kept_past_bind,
  forward_reads_the_next_unit,   // stage 1 reads unit 2's weight: prefetched, it is gathered
  backward_reads_the_next_unit,  // ... in its backward: no-shard keeps it gathered
  forward_writes_a_gradient      // stage 2 writes its own unit's gradient in its forward
};

// An MLP (5 -> 7 -> 9 -> 3: three units, three stages, stage 1 a block)
// that breaks its contract in one way.
class Faulty : public Model {
 public:
  explicit Faulty(Fault fault) : fault_(fault), inner_(make_model(config())) {}
  static ModelConfig config() {
    ModelConfig m;
    m.kind = "mlp";
    m.d_in = 5;
    m.hidden = std::vector<std::int64_t>{7, 9};
    m.n_classes = 3;
    return m;
  }
  std::string kind() const override { return "faulty"; }
  std::vector<UnitDef> units() const override { return inner_->units(); }
  std::map<std::string, ParamInit> param_inits() const override { return inner_->param_inits(); }
  void bind(const ParamLookup& lookup) override {
    inner_->bind(lookup);
    if (fault_ != Fault::none) kept_ = lookup;
  }
  int num_stages() const override { return inner_->num_stages(); }
  int stage_unit(int s) const override {
    if (s == 2 && fault_ == Fault::stage_unit_past_the_units) return 3;
    if (s == 2 && fault_ == Fault::stage_unit_negative) return -1;
    if (s == 1 && fault_ == Fault::unit_of_no_stage) return 0;
    return inner_->stage_unit(s);
  }
  Tensor stage_forward(int s, const Tensor& x, const Batch& batch, Stream stream) override {
    if (s == 1 && fault_ == Fault::forward_reads_the_next_unit)
      kept_("layers.2.weight").value.to_doubles();
    if (s == 2 && fault_ == Fault::forward_writes_a_gradient)
      kept_("layers.2.weight").grad.fill_(0);
    const Tensor y = inner_->stage_forward(s, x, batch, stream);
    if (s == 2 && fault_ == Fault::loss_of_two_elements) return Tensor::full({2}, 1.0, y.dtype());
    return y;
  }
  Tensor stage_backward(int s, const Tensor& dy, Stream stream) override {
    if (s == 1 && fault_ == Fault::backward_reads_the_next_unit)
      kept_("layers.2.weight").value.to_doubles();
    const Tensor dx = inner_->stage_backward(s, dy, stream);
    if (s == 2 && fault_ == Fault::input_gradient_too_wide)
      return Tensor::zeros({dx.size(0), dx.size(1) + 1}, dx.dtype());
    return dx;
  }
  std::vector<int> block_stages() const override {
    return fault_ == Fault::block_past_the_stages ? std::vector<int>{7} : inner_->block_stages();
  }
  void release_stage(int s) override { inner_->release_stage(s); }
  std::int64_t id_limit() const override { return inner_->id_limit(); }
  const ParamLookup& kept() const { return kept_; }

 private:
  Fault fault_;
  std::unique_ptr<Model> inner_;
  ParamLookup kept_;
};

Batch random_batch(std::mt19937& gen, double normaliser) {
  Batch b;
  b.inputs = Tensor::empty({4, 5}, DType::f32);
  for (std::int64_t i = 0; i < 20; ++i)
    b.inputs.data<float>()[i] = std::normal_distribution<float>()(gen);
  b.targets = Tensor::empty({4}, DType::i64);
  for (std::int64_t i = 0; i < 4; ++i) b.targets.data<std::int64_t>()[i] = gen() % 3;
  b.normaliser = normaliser;
  return b;
}

// What `run` throws as InvalidArgument (or `Refused`), or "(accepted)".
template <typename Refused = InvalidArgument>
std::string refusal(const std::function<void()>& run) {
  try {
    run();
  } catch (const Refused& e) {
    return e.what();
  }
  return "(accepted)";
}

// The error one step of a Faulty(fault) on one rank gives.
std::string one_step(Fault fault, std::mt19937& gen) {
  std::string said;
  run_local_ranks(1, [&](const CommPtr& world) {
    said = refusal([&] {
      TrainingEngine engine(std::make_unique<Faulty>(fault), world, EngineConfig{});
      engine.step({random_batch(gen, 4)}, 1e-3);
    });
  });
  return said;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_contract)

BOOST_AUTO_TEST_CASE(what_a_model_says_of_its_stages_is_checked) {
  std::mt19937 gen(static_cast<std::uint32_t>(test::test_seed("model_contract/stages")));
  const std::vector<std::pair<Fault, std::string>> cases = {
      {Fault::stage_unit_past_the_units,
       "model 'faulty': stage_unit(2) is 3, not one of its 3 units (0 to 2)"},
      {Fault::stage_unit_negative, "model 'faulty': stage_unit(2) is -1, not one of its 3 units"},
      {Fault::unit_of_no_stage,
       "model 'faulty': unit 'layers.1' is the unit of no stage (stage_unit)"},
      {Fault::block_past_the_stages,
       "model 'faulty': block_stages()[0] is 7; block stages are stages 1 to 2"},
      {Fault::loss_of_two_elements,
       "model 'faulty': its last stage (2) returned tensor[2] f32 cpu as the loss"},
      {Fault::input_gradient_too_wide,
       "model 'faulty': stage 2's backward returned tensor[4, 10] f32 cpu, but its forward's "
       "input was [4, 9] f32"}};
  for (const auto& [fault, want] : cases) {
    const std::string said = one_step(fault, gen);
    BOOST_TEST(said.find(want) != std::string::npos, "said: " << said);
  }
  BOOST_TEST(one_step(Fault::none, gen) == "(accepted)");
}

// A model may keep the lookup bind() gave it: it stays usable.
BOOST_AUTO_TEST_CASE(a_lookup_kept_past_bind_still_finds_the_parameters) {
  run_local_ranks(1, [&](const CommPtr& world) {
    auto model = std::make_unique<Faulty>(Fault::lookup_kept_past_bind);
    const Faulty& faulty = *model;
    TrainingEngine engine(std::move(model), world, EngineConfig{});
    const Param p = faulty.kept()("layers.1.weight");
    ZRT_EXPECT(p.value.shape() == Shape({9, 7}), "layers.1.weight is ", p.value.str());
  });
}

// Each rank's normaliser is the global batch's target count: ranks that
// pass different ones are refused on every rank, before the update.
BOOST_AUTO_TEST_CASE(ranks_with_different_normalisers_are_refused) {
  const std::uint64_t seed = test::test_seed("model_contract/normalisers");
  std::vector<std::string> said(2);
  run_local_ranks(2, [&](const CommPtr& world) {
    std::mt19937 gen(static_cast<std::uint32_t>(seed) + world->rank());
    TrainingEngine engine(make_model(Faulty::config()), world, EngineConfig{});
    const auto before = engine.full_params();
    said[static_cast<std::size_t>(world->rank())] = refusal([&] {
      engine.step({random_batch(gen, 4 + world->rank())}, 1e-3);  // 4 and 5: neither is 8
    });
    for (const auto& [name, value] : engine.full_params())
      ZRT_EXPECT(value.to_doubles() == before.at(name).to_doubles(), name, " was updated");
    // The same step with the global count trains.
    engine.step({random_batch(gen, 8)}, 1e-3);
  });
  for (int r = 0; r < 2; ++r)
    BOOST_TEST(said[static_cast<std::size_t>(r)].find(
                   "the ranks passed different Batch::normaliser values (this rank's is " +
                   std::to_string(4 + r) + ", their mean 4.5)") != std::string::npos,
               "rank " << r << ": " << said[static_cast<std::size_t>(r)]);
}

// A stage computes with its own unit's parameters, and accumulates their
// gradients in its backward: one that reads another unit's, through a view
// it kept, is refused whether or not that unit happens to be gathered then
// (prefetched, or kept by the strategy), so a model right under one
// setting is right under all; so is a gradient written in a forward.
BOOST_AUTO_TEST_CASE(a_stage_that_reads_another_units_parameter_is_refused) {
  std::mt19937 gen(static_cast<std::uint32_t>(test::test_seed("model_contract/other_unit")));
  using optim::ShardingStrategy;
  const std::string read =
      "layers.2.weight[3, 9] f32 cpu has no memory outside the stages of unit 'layers.2': model "
      "'faulty' reads it elsewhere";
  const std::string written =
      "layers.2.weight.grad[3, 9] f32 cpu has no memory outside the backward of the stages of "
      "unit 'layers.2': model 'faulty' accumulates into it elsewhere";
  const std::vector<std::pair<Fault, std::string>> cases = {
      {Fault::forward_reads_the_next_unit, read},
      {Fault::backward_reads_the_next_unit, read},
      {Fault::forward_writes_a_gradient, written}};
  for (const auto& [fault, want] : cases)
    for (const ShardingStrategy strategy :
         {ShardingStrategy::full_shard, ShardingStrategy::shard_grad_op,
          ShardingStrategy::no_shard})
      for (const int prefetch : {0, 1, 2}) {
        std::string said;
        const std::uint32_t seed = gen();
        run_local_ranks(2, [&](const CommPtr& world) {
          EngineConfig config;
          config.zero.strategy = strategy;
          config.prefetch = prefetch;
          std::mt19937 rank_gen(seed + static_cast<std::uint32_t>(world->rank()));
          const std::string s = refusal<InvalidState>([&] {
            TrainingEngine engine(std::make_unique<Faulty>(fault), world, config);
            engine.step({random_batch(rank_gen, 8)}, 1e-3);
          });
          if (world->rank() == 0) said = s;
        });
        BOOST_TEST(said.find(want) != std::string::npos,
                   "fault " << static_cast<int>(fault) << ", strategy "
                            << optim::strategy_name(strategy) << ", prefetch " << prefetch << ": "
                            << said);
      }
}

// The batch's tensors keep their names, or are named by their field.
BOOST_AUTO_TEST_CASE(a_batch_tensor_of_the_wrong_dtype_is_named) {
  std::mt19937 gen(static_cast<std::uint32_t>(test::test_seed("model_contract/names")));
  run_local_ranks(1, [&](const CommPtr& world) {
    TrainingEngine engine(make_model(Faulty::config()), world, EngineConfig{});
    Batch b = random_batch(gen, 4);
    b.targets = b.targets.to(DType::f64);
    const std::string said = refusal([&] { engine.step({b}, 1e-3); });
    ZRT_EXPECT(said.find("Batch::targets") != std::string::npos, "said: ", said);
  });
}

BOOST_AUTO_TEST_SUITE_END()
