// One rank of zrt trains tiny GPT and an MLP like PyTorch: same initial
// weights (safetensors), same data order, AdamW, clipping and LR schedule;
// losses within 1e-4 relative at every step (fp32 on CPU).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/model_zoo/models/temp_dir.h"
#include "zrt/model_zoo/data/data_files.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/model_zoo/io/param_loader.h"
#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/safetensors.h"

using namespace zrt;
using namespace zrt::model_zoo;

namespace {

constexpr int kSteps = 10;

TrainerConfig config_for(const std::string& kind) {
  TrainerConfig c;
  c.model.kind = kind;
  c.model.preset = "tiny";
  c.engine.zero.adamw.beta1 = 0.9;
  c.engine.zero.adamw.beta2 = 0.95;
  c.engine.zero.adamw.eps = 1e-8;
  c.engine.zero.adamw.weight_decay = 0.1;
  c.engine.zero.adamw.max_grad_norm = 1.0;
  c.batch_size = 8;
  c.seq_len = 16;
  c.micro_batches = 2;
  c.steps = kSteps;
  c.schedule = {.max_lr = 3e-3, .min_lr = 3e-4, .warmup_steps = 3, .total_steps = kSteps};
  return c;
}

void compare_with_torch(const std::string& kind) {
  test::TempDir dir("engine_torch_" + kind);
  TrainerConfig c = config_for(kind);
  // The data and the initial weights go through files, as zrt-train reads them.
  std::string data_path;
  if (kind == "gpt") {
    data_path = dir.file("data.txt");
    std::ofstream(data_path, std::ios::binary) << synthetic_text(3, 8000);
  } else {
    data_path = dir.file("data.safetensors");
    Dataset d = synthetic_cluster_dataset(3, 512, 16, 8);
    write_safetensors(data_path, {{"x", d.x}, {"y", d.y}}, {}, {.keep_float_dtypes = true});
  }
  auto model = make_model(c.model);
  write_safetensors(dir.file("init.safetensors"), model->init_params(11));
  const auto initial = load_model_params(model->units(), dir.file("init.safetensors"));

  std::vector<double> zrt_losses;
  run_local_ranks(1, [&](const CommPtr& world) {
    Trainer t(world, c, load_dataset(data_path), &initial);
    for (int s = 0; s < kSteps; ++s) zrt_losses.push_back(t.step().stats.loss);
  });

  const std::string cmd =
      std::string(ZRT_PYTHON) + " " + ZRT_SOURCE_DIR +
      "/tests/model_zoo/models/torch_train_reference.py --kind " + kind +
      (kind == "gpt" ? " --n-head 2 --seq-len 16" : " --activation gelu") + " --init " +
      dir.file("init.safetensors") + " --data " + data_path +
      " --steps 10 --batch 8 --world 1 --micro 2 --lr 3e-3 --min-lr 3e-4 --warmup 3"
      " --decay-steps 10 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1 --clip 1.0"
      " --out-losses " +
      dir.file("losses.json");
  const int rc = std::system(cmd.c_str());
  BOOST_REQUIRE_MESSAGE(rc == 0,
                        "`" << cmd << "` failed (rc " << rc << "): is python3-torch installed?");
  std::ifstream f(dir.file("losses.json"));
  const auto torch_losses = nlohmann::json::parse(f).at("losses").get<std::vector<double>>();
  BOOST_REQUIRE_EQUAL(torch_losses.size(), zrt_losses.size());
  for (std::size_t s = 0; s < zrt_losses.size(); ++s)
    BOOST_TEST(std::abs(zrt_losses[s] - torch_losses[s]) <= 1e-4 * torch_losses[s],
               kind << " step " << s << ": zrt " << zrt_losses[s] << ", torch " << torch_losses[s]);
  BOOST_TEST(zrt_losses.back() < zrt_losses.front());
  BOOST_TEST_MESSAGE(kind << " losses zrt / torch: " << nlohmann::json(zrt_losses).dump() << " / "
                          << nlohmann::json(torch_losses).dump());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_torch)

BOOST_AUTO_TEST_CASE(gpt_matches_pytorch) { compare_with_torch("gpt"); }
BOOST_AUTO_TEST_CASE(mlp_matches_pytorch) { compare_with_torch("mlp"); }

BOOST_AUTO_TEST_SUITE_END()
