// The sharding strategies of FSDP / LayerZero as choices of process groups and
// of when to free the unsharded parameter.
#pragma once

#include <optional>
#include <string_view>

namespace zrt::optim {

enum class ShardingStrategy {
  full_shard,     // zero3 = zero1 = world; free after forward and backward (ZeRO-3)
  shard_grad_op,  // zero3 = zero1 = world; keep the unsharded param from forward to backward (ZeRO-2)
  no_shard,       // replicated parameters; gradients all-reduced (DDP)
  hybrid_shard,  // shard inside zero3 groups, replicate across them (HSDP)
  layer_zero,    // zero1 = world, zero3 a smaller group, e.g. one node (hpZ / LayerZero)
};

const char* strategy_name(ShardingStrategy s);
// "full", "grad-op", "no-shard", "hybrid", "layer-zero" (and the enum names).
std::optional<ShardingStrategy> parse_strategy(std::string_view name);

}  // namespace zrt::optim
