#include "tests/model_zoo/engine/engine_checks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>

#include "tests/support/rank_check.h"
#include "zrt/model_zoo/data/synthetic_data.h"
#include "zrt/model_zoo/models/model.h"
#include "zrt/model_zoo/trainer/trainer.h"
#include "zrt/optim/checkpoint/full_param_file.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/io/safetensors.h"
#include "zrt/runtime/memory/block_sizes.h"

namespace zrt::testing {

std::vector<std::size_t> expect_save_within_chunk(int ranks, Device device, std::int64_t chunk,
                                                  std::uint64_t seed, const std::string& dir) {
  const std::string want = dir + "/whole.st", got = dir + "/streamed.st";
  const std::size_t bound = block_sizes::block_size_for(chunk * sizeof(float));
  std::vector<std::size_t> added(static_cast<std::size_t>(ranks));
  run_local_ranks(ranks, [&](const CommPtr& world) {
    model_zoo::EngineConfig e;
    e.seed = seed;
    e.zero.device = device;
    e.zero.offload_optimizer.kind = optim::OptimizerOffload::Kind::host;
    // Units of 53k to 67k elements (wte: 997 x 66, rows unpadded).
    model_zoo::ModelConfig c = gpt_of(2, 3, 66, 997, 9);
    c.vocab_align = 1;
    model_zoo::TrainingEngine engine(model_zoo::make_model(c), world, e);
    const auto params = engine.full_params();
    if (world->rank() == 0) write_safetensors(want, params);
    std::int64_t largest = 0;
    for (const auto& h : engine.handles()) largest = std::max(largest, h->zero1_shard().numel());
    ZRT_EXPECT(largest > 20 * chunk, "the largest shard, ", largest,
               " elements, is not over 20 chunks of ", chunk);
    Allocator& memory = *engine.module().allocator();
    memory.reset_peak_stats();
    const std::size_t before = memory.stats().allocated;
    optim::save_full_params(engine.module(), got, "--save", chunk);
    const std::size_t mine = memory.stats().peak_allocated - before;
    added[static_cast<std::size_t>(world->rank())] = mine;
    ZRT_EXPECT(mine <= bound, ranks, " rank(s) on ", device.str(), ", rank ", world->rank(),
               ": the save added ", mine, " bytes to the allocator's peak, above the ", bound,
               " of its chunk (the largest shard: ", largest * 4, " bytes)");
  });
  auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ZRT_EXPECT(bytes_of(got) == bytes_of(want), ranks, " rank(s) on ", device.str(),
             ": the streamed file differs from the whole-model file");
  return added;
}

std::unique_ptr<model_zoo::Trainer> tiny_trainer(const CommPtr& world, const TrainSetup& setup) {
  model_zoo::TrainerConfig c;
  c.model.kind = setup.model;
  c.model.preset = "tiny";
  c.engine.zero.strategy = setup.strategy;
  c.engine.zero.zero3_size = setup.zero3_size;
  c.engine.zero.dtype = setup.dtype;
  c.engine.zero.grad_reduce.offload = setup.offload_grads;
  c.engine.prefetch = setup.prefetch;
  c.engine.gather_after_update = setup.gather_after_update;
  c.engine.checkpointing = setup.checkpointing;
  c.engine.zero.offload_optimizer = setup.offload_optimizer;
  c.engine.zero.grad_reduce.dtype = setup.reduce_dtype;
  c.engine.zero.gather.dtype = setup.gather_dtype;
  c.engine.zero.device = setup.device;
  c.checkpoint_async = setup.checkpoint_async;
  c.host_comm = setup.host_comm;
  c.engine.phase_timer = setup.phase_timer;
  c.engine.zero.cpu_streams = setup.cpu_streams;
  c.engine.zero.adamw.beta2 = 0.95;
  c.engine.zero.adamw.weight_decay = 0.1;
  c.engine.zero.adamw.max_grad_norm = setup.max_grad_norm;
  c.engine.zero.adamw.state_dtype = setup.optimizer_state_dtype;
  c.model.head_unit = setup.head_unit;
  if (setup.vocab_size > 0) c.model.vocab_size = setup.vocab_size;
  c.model.vocab_align = setup.vocab_align;
  c.engine.seed = setup.seed;
  if (setup.link.enabled()) world->set_link_model(setup.link);
  c.batch_size = setup.batch_size;
  c.seq_len = 16;
  c.micro_batches = setup.micro_batches;
  c.steps = setup.steps;
  c.schedule.max_lr = 3e-3;
  c.schedule.min_lr = 3e-4;
  c.schedule.warmup_steps = 2;
  auto data = setup.model == "gpt" ? model_zoo::synthetic_text_dataset()
                                   : model_zoo::synthetic_cluster_dataset(0, 4096, 16, 8);
  if (setup.model == "gpt" && setup.vocab_size > 0) {
    std::int32_t* t = data.tokens.data<std::int32_t>();
    for (std::int64_t i = 0; i < data.tokens.numel(); ++i)
      t[i] %= static_cast<std::int32_t>(setup.vocab_size);
    data.vocab_size = std::min(data.vocab_size, setup.vocab_size);
  }
  return std::make_unique<model_zoo::Trainer>(world, c, std::move(data));
}

void train_until(model_zoo::Trainer& trainer, std::int64_t until, TrainOutput& out) {
  while (trainer.next_step() < until) out.losses.push_back(trainer.step().stats.loss);
}

std::map<std::string, std::vector<double>> full_params(model_zoo::Trainer& trainer) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : trainer.engine().full_params()) out[name] = t.to_doubles();
  return out;
}

TrainOutput train_tiny(const CommPtr& world, const TrainSetup& setup) {
  auto trainer = tiny_trainer(world, setup);
  TrainOutput out;
  train_until(*trainer, setup.steps, out);
  out.params = full_params(*trainer);
  return out;
}

TrainOutput train_tiny_on_local_ranks(int ranks, const TrainSetup& setup) {
  TrainOutput out;
  run_local_ranks(
      ranks,
      [&](const CommPtr& world) {
        auto mine = train_tiny(world, setup);
        if (world->rank() == 0) out = std::move(mine);
      },
      std::chrono::seconds(120));
  return out;
}

void expect_bitwise_alike(int ranks, const TrainSetup& base,
                          const std::vector<TrainSetup>& variants) {
  const TrainOutput want = train_tiny_on_local_ranks(ranks, base);
  for (const TrainSetup& v : variants) {
    const TrainOutput got = train_tiny_on_local_ranks(ranks, v);
    ZRT_EXPECT(got.losses == want.losses, ranks, " ranks: the losses of ", describe(v),
               " differ from those of ", describe(base));
    ZRT_EXPECT(got.params == want.params, ranks, " ranks: the parameters of ", describe(v),
               " differ from those of ", describe(base));
  }
}

TrainSetup sharded_setup(optim::ShardingStrategy strategy, int zero3, DType dtype, int micro,
                         int steps) {
  return {.strategy = strategy,
          .zero3_size = zero3,
          .micro_batches = micro,
          .dtype = dtype,
          .steps = steps};
}

TrainSetup with_head_unit(TrainSetup s) {
  s.head_unit = true;
  return s;
}

std::vector<TrainSetup> one_setup_per_strategy() {
  struct Case {
    const char* model;
    optim::ShardingStrategy strategy;
    int zero3;
    DType dtype;
    int micro;
  };
  const Case cases[] = {
      {"gpt", optim::ShardingStrategy::full_shard, 0, DType::f32, 2},
      {"gpt", optim::ShardingStrategy::shard_grad_op, 0, DType::bf16, 1},
      {"gpt", optim::ShardingStrategy::no_shard, 0, DType::f16, 2},
      {"gpt", optim::ShardingStrategy::hybrid_shard, 1, DType::f32, 1},
      {"gpt", optim::ShardingStrategy::layer_zero, 1, DType::bf16, 2},
      {"mlp", optim::ShardingStrategy::full_shard, 0, DType::f32, 2},
  };
  std::vector<TrainSetup> out;
  for (const Case& c : cases) {
    TrainSetup s = sharded_setup(c.strategy, c.zero3, c.dtype, c.micro, 4);
    s.model = c.model;
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> differences_per_strategy(
    int ranks, const std::function<std::vector<TrainSetup>(const TrainSetup&)>& variants_of) {
  std::vector<std::string> out;
  for (const TrainSetup& base : one_setup_per_strategy()) {
    try {
      expect_bitwise_alike(ranks, base, variants_of(base));
    } catch (const std::exception& e) {
      out.push_back(e.what());
    }
  }
  return out;
}

std::size_t second_step_peak(model_zoo::TrainerConfig config) {
  std::size_t peak = 0;
  config.steps = 2;
  run_local_ranks(1, [&](const CommPtr& world) {
    model_zoo::Trainer trainer(world, config, model_zoo::synthetic_text_dataset());
    trainer.step();
    peak = trainer.step().memory.peak_allocated;
  });
  return peak;
}

void expect_prefetch_depths_alike(int ranks, TrainSetup setup) {
  setup.prefetch = 1;
  std::vector<TrainSetup> variants(2, setup);
  variants[0].prefetch = 0;
  variants[1].prefetch = 2;
  expect_bitwise_alike(ranks, setup, variants);
}

void expect_same_training(const TrainOutput& got, const TrainOutput& want, const Tolerance& tol,
                          const std::string& what) {
  ZRT_EXPECT(got.losses.size() == want.losses.size(), what, ": step counts differ");
  for (std::size_t s = 0; s < want.losses.size(); ++s)
    ZRT_EXPECT(std::abs(got.losses[s] - want.losses[s]) <= tol.loss_rtol * std::abs(want.losses[s]),
               what, ": loss of step ", s, " is ", got.losses[s], ", the reference ",
               want.losses[s]);
  ZRT_EXPECT(got.params.size() == want.params.size(), what, ": parameter sets differ");
  for (const auto& [name, ref] : want.params) {
    auto it = got.params.find(name);
    ZRT_EXPECT(it != got.params.end(), what, ": no parameter ", name);
    ZRT_EXPECT(it->second.size() == ref.size(), what, ": ", name, " has another size");
    double diff2 = 0, ref2 = 0;
    for (std::size_t e = 0; e < ref.size(); ++e) {
      const double d = it->second[e] - ref[e];
      ZRT_EXPECT(std::abs(d) <= tol.param_atol, what, ": ", name, "[", e, "] is ", it->second[e],
                 ", the reference ", ref[e]);
      diff2 += d * d;
      ref2 += ref[e] * ref[e];
    }
    ZRT_EXPECT(diff2 <= tol.param_rl2 * tol.param_rl2 * std::max(ref2, 1.0), what, ": ", name,
               " differs by L2 ", std::sqrt(diff2), " (reference norm ", std::sqrt(ref2), ")");
  }
}

std::vector<TrainSetup> equivalence_setups(const std::string& model, int w) {
  std::vector<TrainSetup> out;
  for (int micro : {1, 4}) {
    auto add = [&](optim::ShardingStrategy s, int z) {
      TrainSetup setup;
      setup.model = model;
      setup.strategy = s;
      setup.zero3_size = z;
      setup.micro_batches = micro;
      out.push_back(setup);
    };
    add(optim::ShardingStrategy::full_shard, w);
    add(optim::ShardingStrategy::shard_grad_op, w);
    add(optim::ShardingStrategy::no_shard, 1);
    for (int z : {1, 2, w}) {
      if (w % z) continue;
      add(optim::ShardingStrategy::hybrid_shard, z);
      add(optim::ShardingStrategy::layer_zero, z);
    }
  }
  // zero3 sizes {1, 2, W} may repeat for small W.
  std::sort(out.begin(), out.end(), [](const TrainSetup& a, const TrainSetup& b) {
    return std::tie(a.micro_batches, a.strategy, a.zero3_size) <
           std::tie(b.micro_batches, b.strategy, b.zero3_size);
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const TrainSetup& a, const TrainSetup& b) {
                          return a.micro_batches == b.micro_batches && a.strategy == b.strategy &&
                                 a.zero3_size == b.zero3_size;
                        }),
            out.end());
  return out;
}

std::string describe(const TrainSetup& s) {
  return s.model + " " + optim::strategy_name(s.strategy) +
         " zero3=" + std::to_string(s.zero3_size) + " micro=" + std::to_string(s.micro_batches) +
         " " + dtype_name(s.dtype) + (s.offload_grads ? " offload" : "") +
         (s.device.is_cpu() ? "" : " " + s.device.str()) +
         " prefetch=" + std::to_string(s.prefetch) +
         (s.gather_after_update ? "" : " gathers-at-step-start") +
         (s.checkpointing.enabled() ? " checkpointing=" + s.checkpointing.str() : "") +
         (s.offload_optimizer.kind != optim::OptimizerOffload::Kind::none ? " offload_optimizer"
                                                                          : "") +
         (s.head_unit ? " head_unit" : "") +
         (s.max_grad_norm != 1.0 ? " clip=" + std::to_string(s.max_grad_norm) : "") +
         (s.optimizer_state_dtype != DType::f32 ? " bf16 moments" : "") +
         (s.vocab_size ? " vocab=" + std::to_string(s.vocab_size) : "") +
         " vocab_align=" + std::to_string(s.vocab_align) +
         (s.link.enabled() ? " link=" + s.link.str() : "");
}

model_zoo::ModelConfig gpt_of(std::int64_t n_layer, std::int64_t n_head, std::int64_t n_embd,
                              std::int64_t vocab_size, std::int64_t block_size) {
  model_zoo::ModelConfig c;
  c.preset = "tiny";
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_embd = n_embd;
  c.vocab_size = vocab_size;
  c.block_size = block_size;
  return c;
}

model_zoo::ModelConfig odd_gpt_config(bool head_unit) {
  model_zoo::ModelConfig c = gpt_of(2, 2, 6, 37, 5);
  c.vocab_align = 8;
  c.head_unit = head_unit;
  return c;
}

}  // namespace zrt::testing
