// Model configs, units and parameter names, seeded init, stage structure,
// micro-batch gradient accumulation and error handling of the model zoo's
// models (the torch comparison is in test_models_torch).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>

#include "tests/model_zoo/layers/layer_test_util.h"
#include "tests/support/expect_throw.h"
#include "tests/support/test_seed.h"
#include "zrt/model_zoo/models/gpt.h"
#include "zrt/model_zoo/models/mlp.h"
#include "zrt/model_zoo/models/param_init.h"
#include "zrt/model_zoo/models/plain_params.h"

using namespace zrt;
using namespace zrt::model_zoo;
using namespace zrt::model_zoo::test;

namespace {

ModelConfig gpt_config(std::string preset = "tiny") {
  ModelConfig c;
  c.kind = "gpt";
  c.preset = std::move(preset);
  return c;
}

double sample_std(const Tensor& t) {
  double s = 0, s2 = 0;
  for (double v : t.to_doubles()) s += v, s2 += v * v;
  const double n = static_cast<double>(t.numel()), mean = s / n;
  return std::sqrt(s2 / n - mean * mean);
}

template <class E>
void check_throws_naming(const std::function<void()>& f, const std::string& needle) {
  zrt::test::expect_throw<E>(f, needle);
}

}  // namespace

BOOST_AUTO_TEST_CASE(presets_resolve) {
  const GptDims tiny = resolve_gpt_dims(gpt_config("tiny"));
  BOOST_TEST(tiny.n_embd % tiny.n_head == 0);
  const GptDims g = resolve_gpt_dims(gpt_config("gpt2-124m"));
  BOOST_TEST(g.n_layer == 12);
  BOOST_TEST(g.n_head == 12);
  BOOST_TEST(g.n_embd == 768);
  BOOST_TEST(g.vocab_size == 50257);
  BOOST_TEST(g.block_size == 1024);
  ModelConfig small = gpt_config("small");
  small.n_layer = 3;
  BOOST_TEST(resolve_gpt_dims(small).n_layer == 3);
  ModelConfig m;
  m.kind = "mlp";
  const MlpDims md = resolve_mlp_dims(m);
  BOOST_TEST(md.d_in == 16);
  BOOST_TEST(md.n_classes == 8);
}

BOOST_AUTO_TEST_CASE(bad_configs_name_the_problem) {
  check_throws_naming<InvalidArgument>([] { make_model(gpt_config("huge")); }, "huge");
  ModelConfig c = gpt_config();
  c.n_embd = 33;
  check_throws_naming<InvalidArgument>([&] { make_model(c); }, "not divisible by n_head");
  c = gpt_config();
  c.n_layer = 0;
  check_throws_naming<InvalidArgument>([&] { make_model(c); }, "n_layer");
  c = gpt_config();
  c.kind = "cnn";
  check_throws_naming<InvalidArgument>([&] { make_model(c); }, "cnn");
  c = gpt_config();
  c.dtype = DType::i32;
  check_throws_naming<InvalidArgument>([&] { make_model(c); }, "floating");
  ModelConfig m;
  m.kind = "mlp";
  m.activation = "tanh";
  check_throws_naming<InvalidArgument>([&] { make_model(m); }, "tanh");
  m = ModelConfig();
  m.kind = "mlp";
  m.hidden = std::vector<std::int64_t>{4, 0};
  check_throws_naming<InvalidArgument>([&] { make_model(m); }, "hidden width");
}

BOOST_AUTO_TEST_CASE(gpt_units_use_hugging_face_names) {
  ModelConfig c = gpt_config();
  c.n_layer = 3;
  auto model = make_model(c);
  const auto units = model->units();
  BOOST_REQUIRE_EQUAL(units.size(), 4u);
  BOOST_TEST(units[0].name == "embed_head");
  BOOST_REQUIRE_EQUAL(units[0].tied.size(), 1u);
  BOOST_TEST(units[0].tied[0].first == "lm_head.weight");
  BOOST_TEST(units[0].tied[0].second == "wte.weight");
  BOOST_TEST(units[3].name == "h.2");
  const GptDims d = resolve_gpt_dims(c);
  const std::int64_t C = d.n_embd;
  std::map<std::string, Shape> shapes;
  for (const ParamDef& p : all_param_defs(units)) shapes[p.fqn()] = p.shape;
  BOOST_TEST((shapes.at("wte.weight") == Shape{d.vocab_size, C}));
  BOOST_TEST((shapes.at("wpe.weight") == Shape{d.block_size, C}));
  BOOST_TEST((shapes.at("h.1.attn.c_attn.weight") == Shape{C, 3 * C}));
  BOOST_TEST((shapes.at("h.1.attn.c_attn.bias") == Shape{3 * C}));
  BOOST_TEST((shapes.at("h.1.attn.c_proj.weight") == Shape{C, C}));
  BOOST_TEST((shapes.at("h.1.mlp.c_fc.weight") == Shape{C, 4 * C}));
  BOOST_TEST((shapes.at("h.1.mlp.c_proj.weight") == Shape{4 * C, C}));
  BOOST_TEST((shapes.at("ln_f.bias") == Shape{C}));
  BOOST_TEST(shapes.size() == 4u + 12u * 3u);
  BOOST_TEST(model->num_stages() == 5);
  BOOST_TEST(model->stage_unit(0) == 0);
  BOOST_TEST(model->stage_unit(2) == 2);
  BOOST_TEST(model->stage_unit(4) == 0);
  BOOST_CHECK_THROW(model->stage_unit(5), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(gpt_init_follows_gpt2) {
  ModelConfig c = gpt_config("small");
  auto model = make_model(c);
  const auto a = model->init_params(42), b = model->init_params(42), o = model->init_params(43);
  BOOST_TEST(a.size() == all_param_defs(model->units()).size());
  BOOST_TEST(max_abs_diff(a.at("h.0.mlp.c_fc.weight"), b.at("h.0.mlp.c_fc.weight")) == 0.0);
  BOOST_TEST(max_abs_diff(a.at("h.0.mlp.c_fc.weight"), o.at("h.0.mlp.c_fc.weight")) > 0.0);
  BOOST_TEST(std::abs(sample_std(a.at("wte.weight")) - 0.02) < 0.001);
  BOOST_TEST(std::abs(sample_std(a.at("h.1.attn.c_attn.weight")) - 0.02) < 0.001);
  const double proj = 0.02 / std::sqrt(2.0 * 4);
  BOOST_TEST(std::abs(sample_std(a.at("h.1.mlp.c_proj.weight")) - proj) < 0.05 * proj);
  BOOST_TEST(std::abs(sample_std(a.at("h.3.attn.c_proj.weight")) - proj) < 0.05 * proj);
  BOOST_TEST(max_abs(a.at("h.2.mlp.c_fc.bias")) == 0.0);
  BOOST_TEST(max_abs(a.at("ln_f.bias")) == 0.0);
  for (double v : a.at("h.0.ln_1.weight").to_doubles()) BOOST_TEST(v == 1.0);
  for (const auto& [fqn, t] : a) BOOST_TEST((t.dtype() == DType::f32 && t.device().is_cpu()));
}

BOOST_AUTO_TEST_CASE(init_stream_is_platform_independent) {
  // std::mt19937_64's 10000th output is fixed by the C++ standard; the
  // Box-Muller normals built on it must match the documented formula.
  std::mt19937_64 gen(5489u);
  gen.discard(9999);
  BOOST_TEST(gen() == 9981545732273789042ull);
  ParamInitStream s(9), t(9);
  std::mt19937_64 raw(9);
  const double u1 = 1.0 - static_cast<double>(raw() >> 11) * 0x1.0p-53;
  const double u2 = static_cast<double>(raw() >> 11) * 0x1.0p-53;
  const double r = std::sqrt(-2.0 * std::log(u1));
  BOOST_TEST(s.normal() == r * std::cos(2.0 * M_PI * u2), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(s.normal() == r * std::sin(2.0 * M_PI * u2), boost::test_tools::tolerance(1e-15));
  double sum = 0, sum2 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double z = t.normal();
    sum += z, sum2 += z * z;
  }
  BOOST_TEST(std::abs(sum / n) < 0.03);
  BOOST_TEST(std::abs(sum2 / n - 1.0) < 0.05);
}

BOOST_AUTO_TEST_CASE(mlp_units_and_init) {
  ModelConfig c;
  c.kind = "mlp";
  c.d_in = 7;
  c.hidden = std::vector<std::int64_t>{5};
  c.n_classes = 3;
  auto model = make_model(c);
  const auto units = model->units();
  BOOST_REQUIRE_EQUAL(units.size(), 2u);
  BOOST_TEST(units[1].name == "layers.1");
  BOOST_TEST((units[0].params[0].shape == Shape{5, 7}));
  BOOST_TEST((units[1].params[1].shape == Shape{3}));
  BOOST_TEST(model->num_stages() == 2);
  const auto p = model->init_params(1);
  const double bound0 = 1.0 / std::sqrt(7.0), bound1 = 1.0 / std::sqrt(5.0);
  BOOST_TEST(max_abs(p.at("layers.0.weight")) <= bound0);
  BOOST_TEST(max_abs(p.at("layers.0.bias")) <= bound0);
  BOOST_TEST(max_abs(p.at("layers.1.weight")) <= bound1);
  BOOST_TEST(max_abs(p.at("layers.1.weight")) > 0.5 * bound1);
}

// Two micro-batches with the global normaliser accumulate the gradient of
// the whole batch (the engine's gradient accumulation relies on this).
BOOST_AUTO_TEST_CASE(micro_batches_accumulate_to_the_full_batch) {
  ModelConfig c = gpt_config();
  c.dtype = DType::f64;
  c.vocab_size = 19;
  c.block_size = 5;
  std::mt19937 gen(2);
  Batch full;
  full.inputs = Tensor::empty({4, 5}, DType::i32);
  full.targets = Tensor::empty({4, 5}, DType::i32);
  for (int i = 0; i < 20; ++i) {
    full.inputs.data<std::int32_t>()[i] = static_cast<std::int32_t>(gen() % 19);
    full.targets.data<std::int32_t>()[i] = static_cast<std::int32_t>(gen() % 19);
  }
  full.normaliser = 20;
  auto whole = make_model(c), split = make_model(c);
  const auto init = whole->init_params(3);
  PlainParams pw(*whole, init, DType::f64), ps(*split, init, DType::f64);
  whole->bind(pw.lookup());
  split->bind(ps.lookup());
  const double loss = forward_backward(*whole, full, 2.5).item(0);
  double split_loss = 0;
  for (int h = 0; h < 2; ++h) {
    Batch half{full.inputs.narrow(2 * h, 2), full.targets.narrow(2 * h, 2), 20};
    split_loss += forward_backward(*split, half, 2.5).item(0);
  }
  BOOST_TEST(std::abs(loss - split_loss) < 1e-12 * loss);
  for (const auto& [fqn, p] : pw.params()) {
    BOOST_TEST(max_abs(p.grad) > 0.0, fqn);
    BOOST_TEST(max_abs_diff(p.grad, ps.at(fqn).grad) <= 1e-12 * max_abs(p.grad), fqn);
  }
  // lm_head.weight resolves to the tied primary.
  BOOST_TEST(pw.at("lm_head.weight").value.shares_storage(pw.at("wte.weight").value));
}

BOOST_AUTO_TEST_CASE(misuse_gives_typed_errors) {
  auto model = make_model(gpt_config());
  Batch b{Tensor::zeros({1, 3}, DType::i32), Tensor::zeros({1, 3}, DType::i32), 3};
  check_throws_naming<InvalidState>([&] { model->stage_forward(0, Tensor(), b, {}); }, "bind");
  const auto init = model->init_params(0);
  PlainParams p(*model, init, DType::f32);
  check_throws_naming<InvalidArgument>([&] { p.at("h.9.ln_1.weight"); }, "h.9.ln_1.weight");
  model->bind(p.lookup());
  check_throws_naming<InvalidState>([&] { model->bind(p.lookup()); }, "twice");
  check_throws_naming<InvalidArgument>([&] { model->stage_forward(7, Tensor(), b, {}); },
                                       "stage 7");
  Batch long_seq{Tensor::zeros({1, 65}, DType::i32), Tensor::zeros({1, 65}, DType::i32), 65};
  check_throws_naming<InvalidArgument>([&] { model->stage_forward(0, Tensor(), long_seq, {}); },
                                       "block_size");
  auto missing = init;
  missing.erase("wpe.weight");
  check_throws_naming<InvalidArgument>([&] { PlainParams(*model, missing, DType::f32); },
                                       "wpe.weight");
}

// Note [Padded vocabulary]: the presets' padding, the same init draws, and a
// padded model's loss and gradients those of the unpadded one (vocab 203
// padded to 256, fresh random ids), its padded rows zero in value and
// gradient, and ids among the padded rows refused.
BOOST_AUTO_TEST_CASE(padded_vocabulary) {
  BOOST_TEST(resolve_gpt_dims(gpt_config("gpt2-124m")).padded_vocab_size == 50304);
  BOOST_TEST(resolve_gpt_dims(gpt_config("tiny")).padded_vocab_size == 256);  // aligned already
  ModelConfig off = gpt_config("gpt2-124m");
  off.vocab_align = 1;
  BOOST_TEST(resolve_gpt_dims(off).padded_vocab_size == 50257);
  off.vocab_align = 0;
  check_throws_naming<InvalidArgument>([&] { make_model(off); }, "vocab_align");

  const std::uint64_t seed = zrt::test::test_seed("models/padded_vocabulary");
  std::mt19937 gen(static_cast<std::uint32_t>(seed));
  ModelConfig c = gpt_config();
  c.vocab_size = 203;
  c.dtype = DType::f64;
  ModelConfig u = c;
  u.vocab_align = 1;
  auto padded = make_model(c), plain = make_model(u);
  BOOST_TEST(padded->units()[0].params[0].pad_rows == 53);
  BOOST_TEST(plain->units()[0].params[0].pad_rows == 0);
  const auto init = padded->init_params(seed), init_plain = plain->init_params(seed);
  for (const auto& [fqn, v] : init_plain)
    BOOST_TEST(v.to_doubles() == init.at(fqn).to_doubles(),
               fqn << ": padding changed the init draws");

  Batch b{Tensor::empty({3, 9}, DType::i32), Tensor::empty({3, 9}, DType::i32), 40};
  for (std::int64_t i = 0; i < 27; ++i) {
    b.inputs.data<std::int32_t>()[i] = static_cast<std::int32_t>(gen() % 203);
    b.targets.data<std::int32_t>()[i] = i % 5 == 0 ? -1 : static_cast<std::int32_t>(gen() % 203);
  }
  b.targets.data<std::int32_t>()[1] = 202;  // the last real class
  PlainParams pp(*padded, init, DType::f64), pu(*plain, init, DType::f64);
  padded->bind(pp.lookup());
  plain->bind(pu.lookup());
  const double lp = forward_backward(*padded, b, 1.5).item(0),
               lu = forward_backward(*plain, b, 1.5).item(0);
  BOOST_TEST(std::abs(lp - lu) <= 1e-13 * std::abs(lu), "loss " << lp << " padded vs " << lu);
  for (const auto& [fqn, p] : pu.params()) {
    BOOST_TEST(pp.at(fqn).grad.shape() == p.grad.shape(), fqn);
    BOOST_TEST(max_abs_diff(pp.at(fqn).grad, p.grad) <= 1e-12 * max_abs(p.grad), fqn);
  }
  const Param& wte = pp.padded("wte.weight");
  BOOST_TEST((wte.value.shape() == Shape{256, 32}));
  BOOST_TEST(max_abs(wte.value.narrow(203, 53)) == 0.0);
  BOOST_TEST(max_abs(wte.grad.narrow(203, 53)) == 0.0);
  BOOST_TEST(max_abs(wte.grad.narrow(0, 203)) > 0.0);
  Batch bad = b;
  bad.inputs = b.inputs.clone();
  bad.inputs.data<std::int32_t>()[4] = 230;  // a padded row is no token
  check_throws_naming<InvalidArgument>([&] { forward_backward(*padded, bad); }, "230");
  bad = b;
  bad.targets = b.targets.clone();
  bad.targets.data<std::int32_t>()[4] = 203;
  check_throws_naming<InvalidArgument>([&] { forward_backward(*padded, bad); }, "203");
}
