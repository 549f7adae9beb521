#include "zrt/optim/grad_stats.h"

#include <algorithm>
#include <cmath>

#include "zrt/kernels/ops/norm.h"

namespace zrt::optim {

GradStats global_grad_stats(std::span<FlatParamHandle* const> handles) {
  ZRT_CHECK_ARG(!handles.empty(), "global_grad_stats: no handles");
  double local_sq = 0, local_bad = 0;
  for (FlatParamHandle* h : handles) {
    const kernels::NormResult r = kernels::squared_norm(h->zero1_grad(), h->options().stream);
    local_sq += r.squared_norm;
    if (r.non_finite) local_bad += 1;
  }
  // See Note [Global gradient norm over zero1 shards].
  // The two numbers travel on the handles' device and stream (NCCL needs
  // device memory), ordered with the collectives on that stream.
  const FlatParamOptions& o = handles.front()->options();
  const ZeroGroups& groups = handles.front()->groups();
  Tensor host = Tensor::from_doubles({local_sq, local_bad}, DType::f64);
  Tensor stats = Tensor::empty({2}, DType::f64, o.device, o.allocator, o.stream);
  stats.copy_(host, o.stream);
  groups.zero1->all_reduce(stats, ReduceOp::sum, o.stream);
  if (groups.replica && groups.replica->size() > 1) groups.replica->all_reduce(stats, ReduceOp::max, o.stream);
  host.copy_(stats, o.stream);
  o.stream.synchronize();
  const std::vector<double> agreed = host.to_doubles();
  GradStats out;
  out.squared_norm = agreed[0];
  out.non_finite = agreed[1] > 0 || !std::isfinite(agreed[0]);
  return out;
}

double clip_coefficient(double total_norm, double max_norm) {
  ZRT_CHECK_ARG(max_norm > 0 && std::isfinite(max_norm), "clip_coefficient: max_norm must be positive (got ",
                max_norm, ")");
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

}  // namespace zrt::optim
