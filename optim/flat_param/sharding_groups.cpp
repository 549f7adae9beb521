#include "zrt/optim/flat_param/sharding_groups.h"

#include "zrt/runtime/comm/zero_groups.h"

namespace zrt::optim {

StrategyPlan plan_strategy(ShardingStrategy strategy, const CommPtr& world, int zero3_size) {
  ZRT_CHECK_ARG(world != nullptr, "plan_strategy needs a world communicator");
  StrategyPlan plan;
  switch (strategy) {
    case ShardingStrategy::full_shard:
    case ShardingStrategy::shard_grad_op:
      plan.groups = {world, world, nullptr};
      plan.reshard_after_forward = strategy == ShardingStrategy::full_shard;
      break;
    case ShardingStrategy::no_shard: {
      CommPtr self = world->split(world->rank(), 0);
      plan.groups = {self, self, world};
      plan.reshard_after_forward = plan.reshard_after_backward = false;
      break;
    }
    case ShardingStrategy::hybrid_shard: {
      ZeroGroups g = make_zero_groups(world, zero3_size);
      plan.groups = {g.zero3, g.zero3, g.replica};
      break;
    }
    case ShardingStrategy::layer_zero: {
      ZeroGroups g = make_zero_groups(world, zero3_size);
      plan.groups = {world, g.zero3, nullptr};
      break;
    }
  }
  return plan;
}

}  // namespace zrt::optim
