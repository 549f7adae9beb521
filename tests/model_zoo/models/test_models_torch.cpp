// Every model's full forward and backward (through PlainParams) against
// PyTorch (torch_model_reference.py, float64 on the CPU), exchanged through
// safetensors files written by zrt's writer. Parameters are the seeded init
// plus uniform(-0.1, 0.1) noise so biases and LayerNorm parameters are not
// trivial. Tolerances: zrt in f64: loss and gradients within 1e-9 relative
// to the largest reference gradient; zrt in f32: loss within 1e-5 relative,
// every gradient within 2e-4 of the largest reference gradient of its tensor.
// Also runs torch_train_reference.py for a few steps and checks its step-0
// loss against zrt's loss of the same global batch.
#include <boost/test/unit_test.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/model_zoo/layers/layer_test_util.h"
#include "tests/model_zoo/models/temp_dir.h"
#include "zrt/model_zoo/data/micro_batch.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/model_zoo/models/plain_params.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::model_zoo;
using namespace zrt::model_zoo::test;

namespace {

std::string script(const std::string& name) {
  return std::string(ZRT_SOURCE_DIR) + "/tests/model_zoo/models/" + name;
}

void run_python(const std::string& args) {
  const std::string cmd = std::string(ZRT_PYTHON) + " " + args;
  const int rc = std::system(cmd.c_str());
  BOOST_REQUIRE_MESSAGE(rc == 0, "`" << cmd << "` failed (rc " << rc
                                     << "): is python3-torch installed for " << ZRT_PYTHON << "?");
}

std::map<std::string, Tensor> noisy_init(const Model& model, std::uint64_t seed,
                                         std::mt19937& gen) {
  auto values = model.init_params(seed);
  for (auto& [fqn, v] : values) {
    Tensor noise = random_tensor(v.shape(), DType::f32, gen, -0.1, 0.1);
    for (std::int64_t i = 0; i < v.numel(); ++i) v.set_item(i, v.item(i) + noise.item(i));
  }
  return values;
}

struct Case {
  ModelConfig config;
  Batch batch;
  std::string script_args;  // --kind ... for the reference
};

void check_against_torch(Case c, DType dtype) {
  c.config.dtype = dtype;
  BOOST_TEST_CONTEXT(c.config.kind << " " << dtype_name(dtype) << " " << c.script_args) {
    std::mt19937 gen(7);
    auto model = make_model(c.config);
    const auto values = noisy_init(*model, 11, gen);
    PlainParams params(*model, values, dtype);
    // Poison the gradients' starting point: accumulate must add to exactly zero.
    params.zero_grads();
    model->bind(params.lookup());
    const Tensor loss = forward_backward(*model, c.batch);

    TempDir dir("models_torch");
    std::map<std::string, Tensor> in;
    for (const auto& [fqn, v] : values) in["param/" + fqn] = v;
    in["batch/inputs"] = c.batch.inputs;
    in["batch/targets"] = c.batch.targets;
    std::ostringstream norm;
    norm.precision(17);
    norm << c.batch.normaliser;
    write_safetensors(dir.file("in.safetensors"), in, {{"normaliser", norm.str()}});
    run_python(script("torch_model_reference.py") + " " + dir.file("in.safetensors") + " " +
               dir.file("out.safetensors") + " " + c.script_args);
    const auto ref = read_safetensors(dir.file("out.safetensors")).tensors;

    const double ref_loss = ref.at("loss").item(0);
    const double loss_tol = dtype == DType::f64 ? 1e-10 : 1e-5;
    BOOST_TEST(std::isfinite(ref_loss));
    BOOST_TEST(std::abs(loss.item(0) - ref_loss) <= loss_tol * std::abs(ref_loss),
               "loss " << loss.item(0) << " vs torch " << ref_loss);
    const double grad_tol = dtype == DType::f64 ? 1e-9 : 2e-4;
    for (const auto& [fqn, p] : params.params()) {
      const Tensor& r = ref.at("grad/" + fqn);
      BOOST_REQUIRE(r.shape() == p.grad.shape());
      const double scale = std::max(max_abs(r), 1e-12);
      BOOST_TEST(max_abs(r) > 0.0, fqn << " has an all-zero reference gradient");
      BOOST_TEST(max_abs_diff(p.grad, r) <= grad_tol * scale, fqn << ": max |zrt - torch| "
                                                                  << max_abs_diff(p.grad, r)
                                                                  << " vs max |torch| " << scale);
    }
  }
}

Batch random_gpt_batch(std::int64_t b, std::int64_t T, std::int64_t vocab, std::mt19937& gen) {
  Batch batch;
  batch.inputs = Tensor::empty({b, T}, DType::i32);
  batch.targets = Tensor::empty({b, T}, DType::i32);
  for (std::int64_t i = 0; i < b * T; ++i) {
    batch.inputs.data<std::int32_t>()[i] = static_cast<std::int32_t>(gen() % vocab);
    batch.targets.data<std::int32_t>()[i] = static_cast<std::int32_t>(gen() % vocab);
  }
  batch.normaliser = static_cast<double>(b * T) * 1.5;  // as if part of a larger global batch
  return batch;
}

Case gpt_case() {
  std::mt19937 gen(3);
  Case c;
  c.config.kind = "gpt";
  c.config.preset = "tiny";
  c.config.vocab_size = 67;
  c.config.block_size = 11;
  c.config.n_embd = 12;
  c.config.n_head = 3;
  c.batch = random_gpt_batch(3, 7, 67, gen);
  c.script_args = "--kind gpt --n-head 3";
  return c;
}

Case mlp_case(const std::string& activation) {
  std::mt19937 gen(5);
  Case c;
  c.config.kind = "mlp";
  c.config.d_in = 5;
  c.config.hidden = std::vector<std::int64_t>{9, 17};
  c.config.n_classes = 7;
  c.config.activation = activation;
  c.batch.inputs = random_tensor({3, 5}, DType::f32, gen, -2.0, 2.0);
  c.batch.targets = Tensor::empty({3}, DType::i64);
  for (int i = 0; i < 3; ++i)
    c.batch.targets.data<std::int64_t>()[i] = static_cast<std::int64_t>(gen() % 7);
  c.batch.normaliser = 4.0;
  c.script_args = "--kind mlp --activation " + activation;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt_matches_torch_f64) { check_against_torch(gpt_case(), DType::f64); }
BOOST_AUTO_TEST_CASE(gpt_matches_torch_f32) { check_against_torch(gpt_case(), DType::f32); }
BOOST_AUTO_TEST_CASE(mlp_gelu_matches_torch) {
  check_against_torch(mlp_case("gelu"), DType::f64);
  check_against_torch(mlp_case("gelu"), DType::f32);
}
BOOST_AUTO_TEST_CASE(mlp_relu_matches_torch) {
  check_against_torch(mlp_case("relu"), DType::f64);
  check_against_torch(mlp_case("relu"), DType::f32);
}

// The training reference runs and its step-0 loss (before any update) is
// zrt's loss of the same global batch, split over 2 ranks × 2 micro-batches.
BOOST_AUTO_TEST_CASE(train_reference_step0_matches_zrt) {
  TempDir dir("train_ref");
  ModelConfig config;
  config.kind = "gpt";
  config.n_embd = 16;
  config.n_head = 2;
  config.n_layer = 1;
  config.block_size = 9;
  auto model = make_model(config);
  const auto init = model->init_params(5);
  write_safetensors(dir.file("init.safetensors"), init);
  const Dataset data = synthetic_text_dataset(1, 2000);
  {
    std::ofstream f(dir.file("data.txt"), std::ios::binary);
    for (double t : data.tokens.to_doubles()) f.put(static_cast<char>(static_cast<int>(t)));
  }
  const BatchGeometry g{8, 9, 2, 2};
  PlainParams params(*model, init, DType::f64);
  model->bind(params.lookup());
  double zrt_loss = 0.0;
  for (int r = 0; r < g.world; ++r)
    for (int m = 0; m < g.micro; ++m)
      zrt_loss += forward_backward(*model, make_micro_batch(data, 0, g, r, m)).item(0);

  run_python(script("torch_train_reference.py") + " --kind gpt --n-head 2 --init " +
             dir.file("init.safetensors") + " --data " + dir.file("data.txt") +
             " --steps 3 --batch 8 --seq-len 9 --world 2 --micro 2 --lr 1e-2 --warmup 1"
             " --dtype float64 --out-losses " +
             dir.file("losses.json") + " --out-weights " + dir.file("final.safetensors"));
  std::ifstream f(dir.file("losses.json"));
  const auto j = nlohmann::json::parse(f);
  const auto losses = j.at("losses").get<std::vector<double>>();
  BOOST_REQUIRE_EQUAL(losses.size(), 3u);
  BOOST_TEST(std::abs(losses[0] - zrt_loss) <= 1e-9 * zrt_loss);
  BOOST_TEST(losses[2] < losses[0]);
  const auto final_params = read_safetensors(dir.file("final.safetensors")).tensors;
  BOOST_REQUIRE_EQUAL(final_params.size(), init.size());
  for (const auto& [fqn, v] : init) {
    BOOST_REQUIRE(final_params.count(fqn));
    BOOST_TEST((final_params.at(fqn).shape() == v.shape()));
  }
  BOOST_TEST(max_abs_diff(final_params.at("wte.weight"), init.at("wte.weight")) > 0.0);
}
