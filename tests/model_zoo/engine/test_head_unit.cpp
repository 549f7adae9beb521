// GPT with ln_f and the LM head in a wrap unit of their own, the head tied
// across units to wte in unit 0 (ModelConfig::head_unit, Note [Parameters
// tied across units]), trains bit for bit as the default layout, where the
// head shares unit 0 with the embedding: every strategy, fp32, bf16 and
// f16, 1 and 3 ranks, offloaded gradients, deeper prefetch and recomputed
// blocks. The step is deterministic and the two layouts do the
// same arithmetic: the head's gradient of wte is rounded on its own and
// added into unit 0's fp32 gradient before the embedding's, in both. Global
// clipping is off: the norm sums the units' parts in another order, so with
// clipping the layouts agree to rounding only. Checkpoints move between the
// layouts.
#include <boost/test/unit_test.hpp>

#include <chrono>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/model_zoo/models/temp_dir.h"
#include "tests/support/rank_check.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace zrt::testing;

namespace {

using S = optim::ShardingStrategy;

TrainSetup base_setup(S strategy, int zero3, DType dtype, int micro) {
  TrainSetup s = sharded_setup(strategy, zero3, dtype, micro, 3);
  s.batch_size = 12;  // divides among 1 and 3 ranks of 1 or 2 micro-batches
  s.max_grad_norm = 0;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(head_unit)

BOOST_AUTO_TEST_CASE(trains_bit_for_bit_as_the_default_layout) {
  struct Case {
    S strategy;
    int zero3;
    DType dtype;
    int micro;
  };
  const Case cases[] = {
      {S::full_shard, 0, DType::f32, 2},    {S::full_shard, 0, DType::bf16, 1},
      {S::shard_grad_op, 0, DType::f32, 1}, {S::shard_grad_op, 0, DType::bf16, 2},
      {S::no_shard, 0, DType::f32, 2},      {S::no_shard, 0, DType::bf16, 1},
      {S::hybrid_shard, 1, DType::f32, 1},  {S::hybrid_shard, 1, DType::bf16, 2},
      {S::full_shard, 0, DType::f16, 2},
  };
  auto alike = [](int ranks, const TrainSetup& base) {
    try {
      expect_bitwise_alike(ranks, base, {with_head_unit(base)});
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  };
  for (int ranks : {1, 3})
    for (const Case& c : cases) alike(ranks, base_setup(c.strategy, c.zero3, c.dtype, c.micro));
  // The owner's gradient reloaded from host memory for the head's addition;
  // the owner gathered two stages ahead; recomputed blocks; layer-zero.
  TrainSetup offload = base_setup(S::full_shard, 0, DType::f32, 2);
  offload.offload_grads = true;
  alike(3, offload);
  TrainSetup deep = base_setup(S::full_shard, 0, DType::bf16, 2);
  deep.prefetch = 2;
  deep.checkpointing = {1};
  alike(3, deep);
  alike(3, base_setup(S::layer_zero, 1, DType::bf16, 2));
}

BOOST_AUTO_TEST_CASE(the_head_unit_holds_the_tie) {
  run_local_ranks(2, [&](const CommPtr& world) {
    auto trainer = tiny_trainer(world, with_head_unit(base_setup(S::full_shard, 0, DType::f32, 1)));
    optim::ZeroModule& module = trainer->engine().module();
    const auto tied = module.tied_params();
    ZRT_EXPECT(tied.size() == 1 && tied[0].fqn == "lm_head.weight" &&
                   module.handle(tied[0].user).name() == "head" &&
                   module.handle(tied[0].owner.unit).name() == "embed" &&
                   module.handle(tied[0].owner.unit).fqn(tied[0].owner.index) == "wte.weight",
               "the head unit's lm_head.weight is not tied to wte.weight of unit 'embed'");
    ZRT_EXPECT(!module.full_params().count("lm_head.weight"), "lm_head.weight is held twice");
  });
}

// A checkpoint of one layout resumes in the other: the same parameters, and
// the run goes on bit for bit as the uninterrupted one.
BOOST_AUTO_TEST_CASE(checkpoints_move_between_layouts) {
  for (const bool saved_with_head_unit : {true, false}) {
    TrainSetup saver = base_setup(S::full_shard, 0, DType::f32, 1);
    saver.steps = 4;
    saver.head_unit = saved_with_head_unit;
    TrainSetup loader = saver;
    loader.head_unit = !saved_with_head_unit;
    const TrainOutput want = train_tiny_on_local_ranks(3, saver);
    model_zoo::test::TempDir dir("head_unit_ckpt");
    try {
      run_local_ranks(
          3,
          [&](const CommPtr& world) {
            TrainOutput got;
            auto first = tiny_trainer(world, saver);
            train_until(*first, 2, got);
            const std::string path =
                first->save_checkpoint(optim::checkpoint_into(dir.file("ckpt")));
            const auto saved = full_params(*first);
            auto second = tiny_trainer(world, loader);
            second->resume(path);
            ZRT_EXPECT(full_params(*second) == saved, describe(loader),
                       ": parameters differ after loading a checkpoint of ", describe(saver));
            train_until(*second, saver.steps, got);
            ZRT_EXPECT(got.losses == want.losses && full_params(*second) == want.params,
                       describe(loader), ": resumed from a checkpoint of ", describe(saver),
                       " trains otherwise than the uninterrupted run");
          },
          std::chrono::seconds(120));
    } catch (const std::exception& e) {
      BOOST_ERROR(e.what());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
