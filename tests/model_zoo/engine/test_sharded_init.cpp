// Note [Sharded initialisation]: an engine given no initial values, each
// rank drawing only its own shards, holds bit for bit the weights of
// model.init_params(seed), at 1 to 4 ranks, every strategy, fp32 and bf16
// compute, the GPT (padded vocabulary, a parameter smaller than the world,
// the LM head tied in a unit of its own) and the MLP; and no rank reads a
// whole-model copy: the stand-ins it is given have no memory behind them.
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/model_zoo/models/temp_dir.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/engine/training_engine.h"
#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/model_zoo/models/model.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::model_zoo;

namespace {

using S = optim::ShardingStrategy;
using zrt::model_zoo::test::TempDir;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

ModelConfig mlp_config() {
  ModelConfig c;
  c.kind = "mlp";
  c.preset = "tiny";
  c.d_in = 5;
  c.hidden = std::vector<std::int64_t>{3, 7};
  c.n_classes = 2;
  return c;
}

// Every rank's engine (sharded init) against init_params on rank 0; throws on a difference.
void check(const ModelConfig& model, int ranks, S strategy, int zero3, DType dtype,
           std::uint64_t seed) {
  const auto want = make_model(model)->init_params(seed);
  run_local_ranks(ranks, [&](const CommPtr& world) {
    EngineConfig e;
    e.seed = seed;
    e.zero.strategy = strategy;
    e.zero.zero3_size = zero3;
    e.zero.dtype = dtype;
    ModelConfig m = model;
    m.dtype = dtype;
    TrainingEngine engine(make_model(m), world, e);
    const auto got = engine.full_params();
    if (world->rank() != 0) return;
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    for (const auto& [name, value] : want) {
      const auto it = got.find(name);
      BOOST_REQUIRE_MESSAGE(it != got.end(), name << " is missing");
      BOOST_CHECK_MESSAGE(same_bits(it->second, value),
                          model.kind << " " << name << " differs at " << ranks << " rank(s), "
                                     << optim::strategy_name(strategy) << " zero3=" << zero3 << " "
                                     << dtype_name(dtype));
    }
  });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sharded_init)

BOOST_AUTO_TEST_CASE(equals_the_whole_model_init_everywhere) {
  const std::uint64_t seed =
      zrt::test::test_seed("sharded_init/equals_the_whole_model_init_everywhere");
  struct Case {
    S strategy;
    int zero3;
  };
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (const Case c : {Case{S::full_shard, 0}, Case{S::shard_grad_op, 0}, Case{S::no_shard, 0},
                         Case{S::hybrid_shard, ranks % 2 == 0 ? 2 : 1},
                         Case{S::layer_zero, ranks % 2 == 0 ? 2 : 1}})
      for (const DType dtype : {DType::f32, DType::bf16}) {
        check(testing::odd_gpt_config(false), ranks, c.strategy, c.zero3, dtype, seed);
        check(testing::odd_gpt_config(true), ranks, c.strategy, c.zero3, dtype, seed);
        check(mlp_config(), ranks, c.strategy, c.zero3, dtype, seed);
      }
}

// Note [Streamed loading]: an engine reading its shards of a file holds
// bit for bit what the whole file loaded gives, f32 and bf16 keys alike.
BOOST_AUTO_TEST_CASE(reads_its_shards_of_a_file) {
  const std::uint64_t seed = zrt::test::test_seed("sharded_init/reads_its_shards_of_a_file");
  TempDir dir("sharded_init");
  auto tensors = make_model(testing::odd_gpt_config(false))->init_params(seed);
  tensors["wte.weight"] = tensors["wte.weight"].to(DType::bf16);  // a key of another dtype
  write_safetensors(dir.file("w.safetensors"), tensors, {}, {.keep_float_dtypes = true});
  const auto units = make_model(testing::odd_gpt_config(false))->units();
  const auto want = load_model_params(units, dir.file("w.safetensors"));
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (const S strategy : {S::full_shard, S::no_shard, S::layer_zero})
      run_local_ranks(ranks, [&](const CommPtr& world) {
        EngineConfig e;
        e.zero.strategy = strategy;
        e.zero.zero3_size = strategy == S::layer_zero && ranks % 2 == 0 ? 2 : 0;
        TrainingEngine engine(make_model(testing::odd_gpt_config(false)), world, e,
                              ParamFileSource(units, dir.file("w.safetensors")));
        const auto got = engine.full_params();
        if (world->rank() != 0) return;
        for (const auto& [name, value] : want)
          BOOST_CHECK_MESSAGE(
              same_bits(got.at(name), value),
              name << " differs at " << ranks << " rank(s), " << optim::strategy_name(strategy));
      });
}

// A NaN in one rank's part of the file fails every rank with the same error
// (the others would otherwise wait in a collective the failed one left).
BOOST_AUTO_TEST_CASE(a_bad_value_in_one_shard_fails_every_rank) {
  TempDir dir("sharded_init");
  auto tensors = make_model(testing::odd_gpt_config(false))->init_params(3);
  Tensor wte = tensors["wte.weight"];
  wte.data<float>()[wte.numel() - 1] = std::nanf("");  // in the last rank's shard
  write_safetensors(dir.file("nan.safetensors"), tensors);
  const auto units = make_model(testing::odd_gpt_config(false))->units();
  std::vector<std::string> errors(3);
  run_local_ranks(3, [&](const CommPtr& world) {
    try {
      TrainingEngine engine(make_model(testing::odd_gpt_config(false)), world, EngineConfig{},
                            ParamFileSource(units, dir.file("nan.safetensors")));
    } catch (const CheckpointError& e) {
      errors[static_cast<std::size_t>(world->rank())] = e.what();
    }
  });
  for (const std::string& e : errors) {
    BOOST_CHECK_MESSAGE(e.find("'wte.weight' holds nan at flat index") != std::string::npos,
                        "a rank said: '" << e << "'");
    BOOST_CHECK_EQUAL(e, errors[0]);
  }
}

BOOST_AUTO_TEST_CASE(another_seed_gives_other_weights) {
  const auto a = make_model(testing::odd_gpt_config(false))->init_params(1);
  const auto b = make_model(testing::odd_gpt_config(false))->init_params(2);
  BOOST_CHECK(!same_bits(a.at("wte.weight"), b.at("wte.weight")));
  BOOST_CHECK(same_bits(a.at("h.0.ln_1.weight"), b.at("h.0.ln_1.weight")));  // constants
}

BOOST_AUTO_TEST_SUITE_END()
