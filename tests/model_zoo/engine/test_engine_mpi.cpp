// Under mpirun -np 1/2/4: tiny GPT and MLP trained by every strategy, zero3
// size and micro-batch count match the same model trained by one rank.
#include <boost/test/unit_test.hpp>

#include "zrt/runtime/comm/launch.h"
#include "zrt/runtime/comm/local_comm.h"
#include "tests/model_zoo/engine/engine_checks.h"

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

BOOST_AUTO_TEST_SUITE_END()
