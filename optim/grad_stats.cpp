#include "zrt/optim/grad_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "zrt/kernels/ops/norm.h"
#include "zrt/runtime/comm/comm_watchdog.h"

namespace zrt::optim {

namespace {

// Note [Ranks agree on each step's settings]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each rank updates its own shard: ranks that step with another lr, other
// betas or decay policy, another loss scale or another step count (a rank that loaded
// another checkpoint) train a model no single setting describes, and
// nothing else in a step notices. The step's statistics collective carries
// the agreement at no extra collective. The 64-bit digest of the settings
// is cut into four 16-bit parts h; per part the zero1 sum carries h, h^2
// and -h. Sums of such whole numbers are exact in f64 in any order, so
// n * sum(h^2) == sum(h)^2 holds exactly, and only when all n parts are
// equal (Cauchy-Schwarz). Replica groups then take the max of each number:
// max(S) + max(-S) == 0 only when every zero1 group summed the same S.
// Every rank reads the same reduced numbers, so all of them agree on the
// verdict and fail together. Different settings pass only if their 64-bit
// digests collide.
constexpr int kDigestParts = 4;
constexpr std::int64_t kAgreementNumbers = 3 * kDigestParts;

void write_agreement(std::uint64_t settings, double* out) {
  for (int i = 0; i < kDigestParts; ++i) {
    const auto h = static_cast<double>((settings >> (16 * i)) & 0xffff);
    out[3 * i] = h;
    out[3 * i + 1] = h * h;
    out[3 * i + 2] = -h;
  }
}

bool agreement_holds(const double* reduced, int group_size) {
  for (int i = 0; i < kDigestParts; ++i) {
    const auto sum = static_cast<std::uint64_t>(reduced[3 * i]);
    const auto sum_sq = static_cast<std::uint64_t>(reduced[3 * i + 1]);
    if (static_cast<unsigned __int128>(sum_sq) * static_cast<unsigned>(group_size) !=
            static_cast<unsigned __int128>(sum) * sum ||
        reduced[3 * i] + reduced[3 * i + 2] != 0)
      return false;
  }
  return true;
}

}  // namespace

GradStats global_grad_stats(std::span<FlatParamHandle* const> handles, std::uint64_t settings) {
  ZRT_CHECK_ARG(!handles.empty(), "global_grad_stats: no handles");
  // See Note [Global gradient norm over zero1 shards]. Each handle's two
  // numbers stay on the device (NCCL needs device memory), are reduced there
  // in one collective per group, and the host waits once, for all of them.
  const FlatParamOptions& o = handles.front()->options();
  const ZeroGroups& groups = handles.front()->groups();
  const auto k = static_cast<std::int64_t>(handles.size());
  Tensor stats =
      Tensor::empty({2 * k + kAgreementNumbers}, DType::f64, o.device, o.allocator, o.stream);
  // Pinned beside a CUDA device, so the copies up and down are only
  // enqueued and the one wait below is the watchdog's: a plain copy_ would
  // block the host on the stream (its collectives included) where no
  // watchdog looks. Zeros on the CPU, as a dry run's copies are dropped.
  Tensor host = o.device.is_cuda() ? Tensor::empty({stats.numel()}, DType::f64, Device::cpu(),
                                                   o.host_allocator, Stream::cpu())
                                   : Tensor::zeros({stats.numel()}, DType::f64);
  if (!o.stream.discards()) {  // a dry run computes nothing
    write_agreement(settings, host.data<double>() + 2 * k);
    stats.slice(2 * k, kAgreementNumbers)
        .copy_async_(host.slice(2 * k, kAgreementNumbers), o.stream);
  }
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
  host.copy_async_(stats, o.stream);  // after the copy up, in stream order
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
  out.settings_agree =
      o.stream.discards() || agreement_holds(host.data<double>() + 2 * k, groups.zero1->size());
  return out;
}

double clip_coefficient(double total_norm, double max_norm) {
  ZRT_CHECK_ARG(max_norm > 0 && std::isfinite(max_norm),
                "clip_coefficient: max_norm must be positive (got ", max_norm, ")");
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

}  // namespace zrt::optim
