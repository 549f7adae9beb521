// Model parameters from safetensors files: the GPT-2 key mapping (the
// transformer. prefix, buffers skipped, lm_head tied), errors for missing,
// mis-shaped, extra and doubled keys, and loading from a file.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <map>
#include <random>

#include "tests/model_zoo/layers/layer_test_util.h"
#include "tests/model_zoo/models/temp_dir.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::model_zoo;
using namespace zrt::model_zoo::test;

namespace {

std::vector<UnitDef> gpt_units(std::int64_t n_layer) {
  ModelConfig c;
  c.n_layer = n_layer;
  c.n_embd = 8;
  c.n_head = 2;
  c.vocab_size = 11;
  c.block_size = 5;
  return make_model(c)->units();
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_keys_map_with_transformer_prefix) {
  const auto units = gpt_units(2);
  std::mt19937 gen(3);
  std::map<std::string, Tensor> hf;
  for (const ParamDef& p : all_param_defs(units))
    hf["transformer." + p.fqn()] = random_tensor(p.shape, DType::f32, gen);
  hf["transformer.h.0.attn.bias"] = Tensor::full({1, 1, 5, 5}, 1.0, DType::f32);
  hf["transformer.h.1.attn.masked_bias"] = Tensor::full({1}, -1e4, DType::f32);
  hf["lm_head.weight"] = hf.at("transformer.wte.weight");
  const auto p = match_model_params(units, hf, "hf");
  BOOST_TEST(p.size() == all_param_defs(units).size());
  BOOST_TEST(max_abs_diff(p.at("h.1.mlp.c_fc.weight"), hf.at("transformer.h.1.mlp.c_fc.weight")) ==
             0.0);

  auto missing = hf;
  missing.erase("transformer.h.1.ln_2.bias");
  try {
    match_model_params(units, missing, "hf");
    BOOST_ERROR("missing key accepted");
  } catch (const CheckpointError& e) {
    BOOST_TEST(std::string(e.what()).find("missing parameter h.1.ln_2.bias") != std::string::npos);
  }
  auto bad_shape = hf;
  bad_shape["transformer.h.0.attn.c_attn.weight"] = Tensor::zeros({24, 8}, DType::f32);
  try {
    match_model_params(units, bad_shape, "hf");
    BOOST_ERROR("mis-shaped key accepted");
  } catch (const CheckpointError& e) {
    const std::string w = e.what();
    BOOST_TEST(w.find("transformer.h.0.attn.c_attn.weight") != std::string::npos);
    BOOST_TEST(w.find("[24, 8]") != std::string::npos, w);
    BOOST_TEST(w.find("[8, 24]") != std::string::npos, w);
  }
  // A deeper model's checkpoint must not half-load into a shallower one.
  BOOST_CHECK_THROW(match_model_params(gpt_units(1), hf, "hf"), CheckpointError);
  auto twice = hf;
  twice["wte.weight"] = hf.at("transformer.wte.weight");
  BOOST_CHECK_THROW(match_model_params(units, twice, "hf"), CheckpointError);

  TempDir dir("st_load");
  write_safetensors(dir.file("m.safetensors"), hf, {}, {.keep_float_dtypes = true});
  BOOST_TEST(load_model_params(units, dir.file("m.safetensors")).size() == p.size());
}

// A file that holds a tied tensor under its second name only (safetensors'
// save_model keeps "lm_head.weight" of GPT-2's tie) loads it as the
// primary; a file's mask buffers are listed once, for one line to say so;
// tied values that differ are printed with every digit they have.
BOOST_AUTO_TEST_CASE(a_tied_name_alone_gives_its_primary) {
  const auto units = gpt_units(1);
  std::mt19937 gen(
      static_cast<std::uint32_t>(zrt::test::test_seed("param_loader/a_tied_name_alone")));
  std::map<std::string, Tensor> hf;
  for (const ParamDef& p : all_param_defs(units))
    hf["transformer." + p.fqn()] = random_tensor(p.shape, DType::f32, gen);
  hf["lm_head.weight"] = hf.at("transformer.wte.weight");
  auto head_only = hf;
  head_only.erase("transformer.wte.weight");
  const auto p = match_model_params(units, head_only, "hf");
  BOOST_TEST(max_abs_diff(p.at("wte.weight"), hf.at("lm_head.weight")) == 0.0);

  hf["transformer.h.0.attn.bias"] = Tensor::full({1, 1, 5, 5}, 1.0, DType::f32);
  TempDir dir("st_tied");
  write_safetensors(dir.file("m.safetensors"), hf);
  const ParamFileSource file(units, dir.file("m.safetensors"));
  BOOST_TEST((file.skipped_keys() == std::vector<std::string>{"transformer.h.0.attn.bias"}));
  BOOST_TEST(skipped_buffers_note("m", file.skipped_keys()) ==
             "m: skipped 1 attention-mask buffer(s), not parameters "
             "('transformer.h.0.attn.bias')");

  auto untied = hf;
  untied["lm_head.weight"] = hf.at("lm_head.weight").clone();
  untied["lm_head.weight"].data<float>()[0] = std::nextafter(
      hf.at("lm_head.weight").data<float>()[0], 1.0f);  // one ulp: 6 digits print them alike
  try {
    match_model_params(units, untied, "hf");
    BOOST_ERROR("an untied head was accepted");
  } catch (const CheckpointError& e) {
    const std::string w = e.what();
    const std::size_t open = w.find(" ("), vs = w.find(" vs "), close = w.find(")", vs);
    BOOST_TEST(w.substr(open + 2, vs - open - 2) != w.substr(vs + 4, close - vs - 4), w);
  }
}
