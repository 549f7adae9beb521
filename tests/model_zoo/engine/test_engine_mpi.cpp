// Under mpirun -np 1/2/4: tiny GPT and MLP trained by every strategy, zero3
// size and micro-batch count match the same model trained by one rank.
#include <boost/test/unit_test.hpp>

#include "tests/model_zoo/engine/engine_checks.h"
#include "tests/support/rank_check.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using namespace zrt::testing;

namespace {

CommPtr world() {
  static CommPtr w = init_world().comm;
  return w;
}

void check(const std::string& model) {
  TrainOutput ref;
  TrainSetup one;
  one.model = model;
  run_local_ranks(1, [&](const CommPtr& w) { ref = train_tiny(w, one); });
  for (const auto& setup : equivalence_setups(model, world()->size())) {
    try {
      expect_same_training(train_tiny(world(), setup), ref, {}, describe(setup));
    } catch (const std::exception& e) {
      BOOST_ERROR("rank " << world()->rank() << ": " << e.what());
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_mpi)

BOOST_AUTO_TEST_CASE(gpt_matches_one_rank) { check("gpt"); }
BOOST_AUTO_TEST_CASE(mlp_matches_one_rank) { check("mlp"); }

// GPT with its head in a unit of its own, tied across units to wte (Note
// [Parameters tied across units]), trains as the default layout: bit for bit
// on up to 2 ranks (without clipping: the global norm sums the units in
// another order). With more, MPI may group the ranks' sums differently for
// the two layouts' differently sized buffers (its algorithm depends on the
// size), so there they agree to rounding (Note [Comparing training runs]).
BOOST_AUTO_TEST_CASE(gpt_head_unit_matches_the_default_layout) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    TrainSetup base = sharded_setup(optim::ShardingStrategy::full_shard, 0, dtype, 2, 3);
    base.max_grad_norm = 0;
    const TrainSetup head = with_head_unit(base);
    try {
      const TrainOutput want = train_tiny(world(), base);
      const TrainOutput got = train_tiny(world(), head);
      if (world()->size() <= 2)
        ZRT_EXPECT(got.losses == want.losses && got.params == want.params, describe(head),
                   " trains otherwise than ", describe(base));
      else
        expect_same_training(got, want,
                             dtype == DType::f32 ? Tolerance{} : Tolerance{1e-3, 2e-2, 2e-2},
                             describe(head) + " against " + describe(base));
    } catch (const std::exception& e) {
      BOOST_ERROR("rank " << world()->rank() << ": " << e.what());
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
