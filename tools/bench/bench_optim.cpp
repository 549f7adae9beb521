// zrt-bench optim --params N [--handles H] [--device cpu|cuda] [--reps R] [--json]
//
// Times the full ZeroAdamW step (global norm and non-finite check, agreement
// collective, clipping folded into the fused update, bookkeeping) on one rank
// of a single-rank local world, N parameters spread over H handles, and
// compares it with the fused AdamW kernel alone on the same buffers in the
// same run, and with the two kernel passes the step needs (norm + update).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tools/bench/bench_util.h"
#include "tools/bench/suites.h"
#include "zrt/kernels/ops/adamw.h"
#include "zrt/kernels/ops/norm.h"
#include "zrt/optim/flat_param/sharding_groups.h"
#include "zrt/optim/zero_adamw.h"
#include "zrt/runtime/comm/local_comm.h"
#include "zrt/runtime/memory/caching_allocator.h"
#include "zrt/runtime/stream.h"

namespace zrt::bench {
namespace {

struct Options {
  std::int64_t params = std::int64_t(1) << 24;
  int handles = 4;
  Device device = Device::cpu();
  int reps = 10;
  bool json = false;
};

Options parse(int argc, char** argv) {
  Options o;
  OptionParser(
      "optim",
      "usage: zrt-bench optim --params N [--handles H] [--device cpu|cuda] [--reps R] [--json]")
      .value("--params", o.params)
      .value("--handles", o.handles)
      .value("--device", o.device)
      .runs(o.reps, o.json)
      .parse(argc, argv);
  // A handle's unit is whole rows of a [rows, 64] weight and its 1-element bias.
  ZRT_CHECK_ARG(o.handles > 0, "--handles must be positive (got ", o.handles, ")");
  ZRT_CHECK_ARG(o.params / o.handles >= 65, "--params ", o.params, " over --handles ", o.handles,
                " leaves fewer than 65 a handle, one row of 64 weights and a bias");
  return o;
}

// One unit like a transformer linear layer: a [rows, 64] weight (decays) and
// a [rows] bias (does not), about `numel` parameters in all.
std::vector<optim::NamedParam> unit_params(std::int64_t numel, int k, Device device) {
  const std::int64_t rows = numel / 65;
  return {{"h." + std::to_string(k), "weight", Tensor::full({rows, 64}, 0.02, DType::f32, device)},
          {"h." + std::to_string(k), "bias", Tensor::full({rows}, 0.0, DType::f32, device)}};
}

}  // namespace

int bench_optim(int argc, char** argv) {
  const Options o = parse(argc, argv);
  OwnedStream owned(o.device);
  const Stream s = owned.get();
  CommPtr world = make_local_world(1).front();
  optim::StrategyPlan plan = optim::plan_strategy(optim::ShardingStrategy::full_shard, world, 1);
  optim::FlatParamOptions fo;
  fo.device = o.device;
  fo.stream = s;
  // A caching allocator, as ZeroModule gives its handles: the step's scratch
  // (the statistics, the norm's partials) would otherwise be cudaMalloc'd,
  // and its cudaFree wait for the device, every step.
  fo.allocator = make_caching_allocator(o.device);
  std::vector<std::unique_ptr<optim::FlatParamHandle>> handles;
  std::vector<optim::FlatParamHandle*> raw;
  std::int64_t total = 0;
  for (int k = 0; k < o.handles; ++k) {
    fo.name = "h." + std::to_string(k);
    handles.push_back(std::make_unique<optim::FlatParamHandle>(
        unit_params(o.params / o.handles, k, o.device), plan.groups, fo));
    raw.push_back(handles.back().get());
    total += handles.back()->zero1_shard().numel();
  }
  // One backward so every zero1 gradient shard holds a real reduced gradient.
  for (auto& h : handles) {
    h->pre_forward();
    h->post_forward();
    h->pre_backward();
    for (std::size_t i = 0; i < h->num_params(); ++i) h->grad(i).fill_(1e-3 * double(i + 1));
    h->post_backward(true);
  }
  optim::AdamWOptions ao;
  ao.weight_decay = 0.1;
  ao.max_grad_norm = 1.0;
  optim::ZeroAdamW opt(raw, ao);
  const kernels::AdamWHyperparams hp{.lr = 1e-4,
                                     .beta1 = ao.beta1,
                                     .beta2 = ao.beta2,
                                     .eps = ao.eps,
                                     .weight_decay = ao.weight_decay};
  auto kernel_only = [&] {
    for (std::size_t k = 0; k < handles.size(); ++k)
      kernels::fused_adamw(handles[k]->zero1_shard(), opt.exp_avg_shard(k), opt.exp_avg_sq_shard(k),
                           handles[k]->zero1_grad(), 10, hp, opt.decay_ranges(k), {}, s);
  };
  auto norm_and_kernel = [&] {
    for (auto& h : handles) kernels::squared_norm(h->zero1_grad(), s);
    kernel_only();
  };
  auto full_step = [&] { opt.step(1e-4); };
  auto sync = [&] { s.synchronize(); };

  // In turn, so that the ratios to the kernel hold on a busy machine.
  const std::vector<double> medians =
      interleaved_median_seconds({kernel_only, norm_and_kernel, full_step}, 2, o.reps, sync);
  const double kernel_s = medians[0], passes_s = medians[1], step_s = medians[2];
  Table table({"what", "params", "handles", "ms", "Mparams_s", "vs_kernel"});
  auto row = [&](const char* what, double secs) {
    table.add({what, std::to_string(total), std::to_string(o.handles), Table::num(secs * 1e3),
               Table::num(double(total) / secs / 1e6, 1), Table::num(kernel_s / secs, 3)});
  };
  row("fused_adamw kernel only", kernel_s);
  row("squared_norm + fused_adamw", passes_s);
  row("ZeroAdamW::step", step_s);
  if (!o.json)
    std::printf(
        "zrt-bench optim on %s: %lld parameters (whole rows of 65) in %d handles, median of %d\n",
        o.device.str().c_str(), (long long)total, o.handles, o.reps);
  table.print(o.json);
  return 0;
}

}  // namespace zrt::bench
