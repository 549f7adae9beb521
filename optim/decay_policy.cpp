#include "zrt/optim/decay_policy.h"

#include <algorithm>

namespace zrt::optim {

bool decay_matrices(const std::string&, const Shape& shape) { return shape.size() >= 2; }

std::vector<kernels::ElementRange> shard_decay_ranges(const FlatParamHandle& handle,
                                                      const DecayPolicy& decays) {
  ZRT_CHECK_ARG(static_cast<bool>(decays), "shard_decay_ranges: empty decay policy for ",
                handle.name());
  const auto& infos = handle.zero1_shard_infos();
  const auto& params = handle.layout().params();
  std::vector<kernels::ElementRange> ranges;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ShardParamInfo& info = infos[i];
    if (!info.in_shard || info.numel_in_shard == 0 || !decays(params[i].fqn, params[i].shape))
      continue;
    ranges.push_back({info.offset_in_shard, info.offset_in_shard + info.numel_in_shard});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const kernels::ElementRange& a, const kernels::ElementRange& b) {
              return a.begin < b.begin;
            });
  std::vector<kernels::ElementRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && merged.back().end == r.begin)
      merged.back().end = r.end;
    else
      merged.push_back(r);
  }
  return merged;
}

}  // namespace zrt::optim
