// optim::FlatParamHandle under mpirun: the same checks as the local-backend suite,
// each rank a process.
#include <boost/test/unit_test.hpp>

#include "tests/optim/flat_param/handle_checks.h"
#include "zrt/runtime/comm/launched_world.h"

using namespace zrt;

namespace {

CommPtr world() {
  static thread_local CommPtr w = init_world().comm;  // one world per test process
  return w;
}

// zero3 sizes that divide the world size.
std::vector<int> divisors(int w) {
  std::vector<int> out;
  for (int z = 1; z <= w; ++z)
    if (w % z == 0) out.push_back(z);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(flat_param_handle_mpi)

BOOST_AUTO_TEST_CASE(round_trip) {
  // Each layout round trip, and with an int8 gather (Note [Quantized parameter gather]).
  const int w = world()->size();
  auto check = [](optim::ShardingStrategy strategy, int z, DType dt) {
    BOOST_CHECK_NO_THROW(testing::check_round_trip(world(), strategy, z, dt));
    BOOST_CHECK_NO_THROW(testing::check_quantized_gather(world(), strategy, z, dt));
  };
  for (DType dt : {DType::f32, DType::bf16}) {
    check(optim::ShardingStrategy::full_shard, w, dt);
    check(optim::ShardingStrategy::no_shard, 1, dt);
    for (int z : divisors(w)) {
      check(optim::ShardingStrategy::layer_zero, z, dt);
      check(optim::ShardingStrategy::hybrid_shard, z, dt);
    }
  }
}

BOOST_AUTO_TEST_CASE(gradient_path) {
  const int w = world()->size();
  for (bool offload : {false, true}) {
    BOOST_CHECK_NO_THROW(testing::check_gradient_path(world(), optim::ShardingStrategy::full_shard,
                                                      w, ReduceOp::avg, 3, offload));
    BOOST_CHECK_NO_THROW(testing::check_gradient_path(
        world(), optim::ShardingStrategy::shard_grad_op, w, ReduceOp::sum, 2, offload));
    BOOST_CHECK_NO_THROW(testing::check_gradient_path(world(), optim::ShardingStrategy::no_shard, 1,
                                                      ReduceOp::avg, 1, offload));
    for (int z : divisors(w)) {
      BOOST_CHECK_NO_THROW(testing::check_gradient_path(
          world(), optim::ShardingStrategy::hybrid_shard, z, ReduceOp::avg, 2, offload));
      BOOST_CHECK_NO_THROW(testing::check_gradient_path(
          world(), optim::ShardingStrategy::layer_zero, z, ReduceOp::sum, 2, offload));
      // Note [Quantized gradient reduce-scatter]: the all-to-all over MPI.
      for (const optim::ReduceDType t : {optim::ReduceDType::int8, optim::ReduceDType::int4})
        BOOST_CHECK_NO_THROW(testing::check_gradient_path(
            world(), optim::ShardingStrategy::hybrid_shard, z, ReduceOp::avg, 2, offload, t));
    }
  }
}

BOOST_AUTO_TEST_CASE(quantized_gather_bytes) {
  BOOST_CHECK_NO_THROW(testing::check_quantized_gather_bytes(world()));
}

BOOST_AUTO_TEST_CASE(mismatch_on_one_rank_is_named_on_all) {
  BOOST_CHECK_NO_THROW(testing::check_mismatch_is_named(world()));
}

BOOST_AUTO_TEST_SUITE_END()
