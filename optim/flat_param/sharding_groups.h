// How each ShardingStrategy maps onto process groups and reshard points.
#pragma once

#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/flat_param/sharding_strategy.h"
#include "zrt/runtime/comm/communicator.h"

namespace zrt::optim {

struct StrategyPlan {
  ZeroGroups groups;
  bool reshard_after_forward = true;
  bool reshard_after_backward = true;
};

// Collective over `world` (it may split it). `zero3_size` is the group size
// Z for hybrid and layer-zero (must divide the world size); the other
// strategies ignore it.
//   full       zero1 = zero3 = world
//   grad-op    zero1 = zero3 = world, unsharded param kept from forward to backward
//   no-shard   zero1 = zero3 = this rank alone, gradients all-reduced over world
//   hybrid     zero1 = zero3 = ranks with equal rank / Z, replicas across them
//   layer-zero zero1 = world, zero3 = ranks with equal rank / Z
StrategyPlan plan_strategy(ShardingStrategy strategy, const CommPtr& world, int zero3_size);

}  // namespace zrt::optim
