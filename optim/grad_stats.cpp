#include "zrt/optim/grad_stats.h"

#include <algorithm>
#include <cmath>

#include "zrt/kernels/ops/norm.h"
#include "zrt/runtime/comm/comm_watchdog.h"

namespace zrt::optim {

GradStats global_grad_stats(std::span<FlatParamHandle* const> handles) {
  ZRT_CHECK_ARG(!handles.empty(), "global_grad_stats: no handles");
  // See Note [Global gradient norm over zero1 shards]. Each handle's two
  // numbers stay on the device (NCCL needs device memory), are reduced there
  // in one collective per group, and the host waits once, for all of them.
  const FlatParamOptions& o = handles.front()->options();
  const ZeroGroups& groups = handles.front()->groups();
  const auto k = static_cast<std::int64_t>(handles.size());
  Tensor stats = Tensor::empty({2 * k}, DType::f64, o.device, o.allocator, o.stream);
  Event done(o.device);
  for (std::int64_t i = 0; i < k; ++i) {
    const Stream s = handles[static_cast<std::size_t>(i)]->options().stream;
    if (s != o.stream) {  // its gradient was written on its own stream
      done.record(o.stream);
      done.wait(s);
    }
    kernels::squared_norm_into(handles[static_cast<std::size_t>(i)]->zero1_grad(),
                               stats.slice(2 * i, 2), s);
    if (s != o.stream) {
      done.record(s);
      done.wait(o.stream);
    }
  }
  groups.zero1->all_reduce(stats, ReduceOp::sum, o.stream);
  if (groups.replica && groups.replica->size() > 1)
    groups.replica->all_reduce(stats, ReduceOp::max, o.stream);
  // Pinned beside a CUDA device, so the copy down is only enqueued and the
  // one wait below is the watchdog's: a plain copy_ would block the host on
  // the stream (its collectives included) where no watchdog looks. Zeros on
  // the CPU, as a dry run's copies are dropped.
  Tensor host = o.device.is_cuda() ? Tensor::empty({2 * k}, DType::f64, Device::cpu(),
                                                   o.host_allocator, Stream::cpu())
                                   : Tensor::zeros({2 * k}, DType::f64);
  host.copy_async_(stats, o.stream);
  if (o.device.is_cuda())
    host.storage().record_use(o.stream);  // freed by a throwing wait: reused after the copy
  CommWatchdog({groups.zero1, groups.replica})
      .synchronize(o.stream, "reading the gradient statistics");
  GradStats out;
  for (std::int64_t i = 0; i < k; ++i) {
    out.squared_norm += host.item(2 * i);
    out.non_finite = out.non_finite || host.item(2 * i + 1) > 0;
  }
  out.non_finite = out.non_finite || !std::isfinite(out.squared_norm);
  return out;
}

double clip_coefficient(double total_norm, double max_norm) {
  ZRT_CHECK_ARG(max_norm > 0 && std::isfinite(max_norm),
                "clip_coefficient: max_norm must be positive (got ", max_norm, ")");
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

}  // namespace zrt::optim
