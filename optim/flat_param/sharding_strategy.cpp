#include "zrt/optim/flat_param/sharding_strategy.h"

namespace zrt::optim {

const char* strategy_name(ShardingStrategy s) {
  switch (s) {
    case ShardingStrategy::full_shard:
      return "full";
    case ShardingStrategy::shard_grad_op:
      return "grad-op";
    case ShardingStrategy::no_shard:
      return "no-shard";
    case ShardingStrategy::hybrid_shard:
      return "hybrid";
    case ShardingStrategy::layer_zero:
      return "layer-zero";
  }
  return "?";
}

std::optional<ShardingStrategy> parse_strategy(std::string_view name) {
  struct Alias {
    std::string_view name;
    ShardingStrategy s;
  };
  static constexpr Alias kAliases[] = {
      {"full", ShardingStrategy::full_shard},
      {"full_shard", ShardingStrategy::full_shard},
      {"grad-op", ShardingStrategy::shard_grad_op},
      {"shard_grad_op", ShardingStrategy::shard_grad_op},
      {"no-shard", ShardingStrategy::no_shard},
      {"no_shard", ShardingStrategy::no_shard},
      {"hybrid", ShardingStrategy::hybrid_shard},
      {"hybrid_shard", ShardingStrategy::hybrid_shard},
      {"layer-zero", ShardingStrategy::layer_zero},
      {"layer_zero", ShardingStrategy::layer_zero},
  };
  for (const auto& a : kAliases)
    if (a.name == name) return a.s;
  return std::nullopt;
}

}  // namespace zrt::optim
