#include "tools/train/memory_plan_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <vector>

#include "tools/train/train_setup.h"
#include "zrt/model_zoo/trainer/memory_plan.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/launched_world.h"

namespace zrt::train {

namespace {

using model_zoo::MemoryByCategory;
using model_zoo::RankMemoryPlan;

std::string mib(std::size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

bool same_plan(const RankMemoryPlan& a, const RankMemoryPlan& b) {
  const MemoryByCategory &x = a.at_peak, &y = b.at_peak;
  return a.peak == b.peak && a.reserved_peak == b.reserved_peak &&
         x.master_and_moments == y.master_and_moments && x.zero3_shards == y.zero3_shards &&
         x.unsharded_params == y.unsharded_params && x.gradients == y.gradients &&
         x.communication == y.communication && x.activations == y.activations &&
         x.rounding == y.rounding && a.host_peak == b.host_peak &&
         a.host_at_peak.master_and_moments == b.host_at_peak.master_and_moments &&
         a.host_at_peak.data == b.host_at_peak.data &&
         a.host_at_peak.loading == b.host_at_peak.loading;
}

void print_table(const model_zoo::MemoryPlan& plan, std::FILE* out) {
  std::fprintf(out, "%-9s %10s %10s | %10s %10s %10s %10s %10s %11s %9s | %10s %10s %10s %10s\n",
               "ranks", "peak", "reserved", "master+m,v", "zero3", "unsharded", "gradients", "comm",
               "activations", "rounding", "host", "master+m,v", "data", "init-read");
  // Ranks with the same plan share a row (most do: shards are padded to one size).
  for (std::size_t first = 0; first < plan.ranks.size();) {
    std::size_t last = first;
    while (last + 1 < plan.ranks.size() && same_plan(plan.ranks[last + 1], plan.ranks[first]))
      ++last;
    const RankMemoryPlan& r = plan.ranks[first];
    const std::string ranks =
        first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
    const MemoryByCategory& m = r.at_peak;
    const MemoryByCategory& h = r.host_at_peak;
    std::fprintf(out, "%-9s %10s %10s | %10s %10s %10s %10s %10s %11s %9s | %10s %10s %10s %10s\n",
                 ranks.c_str(), mib(r.peak).c_str(), mib(r.reserved_peak).c_str(),
                 mib(m.master_and_moments).c_str(), mib(m.zero3_shards).c_str(),
                 mib(m.unsharded_params).c_str(), mib(m.gradients).c_str(),
                 mib(m.communication).c_str(), mib(m.activations).c_str(), mib(m.rounding).c_str(),
                 mib(r.host_peak).c_str(), mib(h.master_and_moments).c_str(), mib(h.data).c_str(),
                 mib(h.loading).c_str());
    first = last + 1;
  }
}

}  // namespace

std::size_t parse_byte_count(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  const std::string number = text.substr(std::min(text.size(), text.find_first_not_of(' ')));
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    ZRT_THROW(InvalidArgument, "'", text, "' is not a byte count (e.g. 24GiB, 80GB, 2.5e10)");
  }
  // Decimal only: stod would take 0x100 as 256.
  ZRT_CHECK_ARG(number.substr(0, used).find_first_not_of("0123456789.eE+-") == std::string::npos,
                "'", text, "' is not a byte count (e.g. 24GiB, 80GB, 2.5e10)");
  std::string unit = number.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  const std::vector<std::pair<std::string, double>> units = {{"", 1},
                                                             {"B", 1},
                                                             {"KB", 1e3},
                                                             {"MB", 1e6},
                                                             {"GB", 1e9},
                                                             {"TB", 1e12},
                                                             {"KiB", 1024.0},
                                                             {"MiB", 1048576.0},
                                                             {"GiB", 1073741824.0},
                                                             {"TiB", 1099511627776.0}};
  for (const auto& [name, scale] : units) {
    if (unit != name) continue;
    const double bytes = value * scale;
    ZRT_CHECK_ARG(std::isfinite(bytes) && bytes >= 1 && bytes < 1e18, "'", text,
                  "' is not a usable memory size (1 byte up to 1e18 bytes)");
    return static_cast<std::size_t>(bytes);
  }
  ZRT_THROW(InvalidArgument, "'", text, "': unknown unit '", unit,
            "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

namespace {
// A byte count spelt as it can be pasted into a flag: whole MiB, else bytes.
std::string pasteable_bytes(std::size_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + "MiB" : std::to_string(bytes);
}

// The flag of `value` in a choice's table of (flag value, value).
template <typename T>
std::string flag_value(const std::vector<std::pair<std::string, T>>& table, T value) {
  for (const auto& [name, v] : table)
    if (v == value) return name;
  return "?";
}

// The settings that move memory, beyond the header's fixed ones, where they
// differ from their defaults: ", --flag value" each.
std::string memory_settings(const TrainOptions& o) {
  const optim::ZeroModuleOptions& z = o.trainer.engine.zero;
  std::string out;
  if (z.adamw.state_dtype != DType::f32) out += ", --optimizer-state-dtype bf16";
  if (z.grad_reduce.offload) out += ", --offload-grads";
  if (z.gather.dtype != optim::GatherDType::compute)
    out += ", --gather-dtype " + flag_value(gather_dtype_flags(), z.gather.dtype);
  if (z.grad_reduce.dtype != optim::ReduceDType::f32)
    out += ", --reduce-dtype " + flag_value(reduce_dtype_flags(), z.grad_reduce.dtype);
  if (z.memory_limit > 0) out += ", --memory-limit " + pasteable_bytes(z.memory_limit);
  return out;
}
}  // namespace

bool print_memory_plan(const TrainOptions& o, std::FILE* out) {
  const int world = o.ranks > 0 ? o.ranks : detect_launch().size;
  const model_zoo::TrainerConfig config = trainer_config(o, 0);
  // Planned before anything is printed: a plan that fails prints its error alone.
  const std::size_t data = data_memory_bytes(o, config);
  const model_zoo::MemoryPlan plan =
      model_zoo::plan_memory(config, world, model_zoo::kPlanSteps, data);
  std::fprintf(out,
               "zrt-train --plan: %s %s, %d rank(s), --strategy %s, --dtype %s, batch %lld%s, %d "
               "micro-batch(es), "
               "--prefetch %d, --activation-checkpointing %s, --offload-optimizer %s%s%s\n",
               o.trainer.model.kind.c_str(), o.trainer.model.preset.c_str(), world,
               optim::strategy_name(o.trainer.engine.zero.strategy),
               dtype_flag(o.trainer.engine.zero.dtype),
               static_cast<long long>(o.trainer.batch_size),
               o.trainer.model.kind == "gpt"
                   ? (" x " + std::to_string(o.trainer.seq_len) + " tokens").c_str()
                   : "",
               o.trainer.micro_batches, o.trainer.engine.prefetch,
               o.trainer.engine.checkpointing.str().c_str(),
               o.trainer.engine.zero.offload_optimizer.str().c_str(), memory_settings(o).c_str(),
               o.device == "cpu" ? "" : " (a CUDA run, planned on CPU streams of its shape)");
  std::fprintf(out,
               "%d dry steps per rank: every allocation of the run, no memory behind it, nothing "
               "computed; device columns at the largest step's peak, host columns: host memory "
               "outside the device's allocator, at its peak from construction on (with the data "
               "set and --init-from's read buffers then held). MiB:\n",
               model_zoo::kPlanSteps);
  print_table(plan, out);
  if (const std::size_t limit = o.trainer.engine.zero.memory_limit;
      limit > 0 && plan.largest().reserved_peak > limit)
    std::fprintf(out,
                 "the largest rank reserves %s, above --memory-limit %s: this run does not "
                 "fit (--fit BYTES lists what does)\n",
                 human_bytes(static_cast<double>(plan.largest().reserved_peak)).c_str(),
                 human_bytes(static_cast<double>(limit)).c_str());
  // Note [Host memory in the plan]
  if (o.device == "cpu")
    std::fprintf(
        out, "%s",
        o.trainer.engine.zero.memory_limit > 0
            ? "--device cpu with --memory-limit: the limit caps the reserved column; "
              "host memory is outside it, as a GPU's host memory is\n"
            : "--device cpu: the device's memory is host memory too; a rank holds up "
              "to reserved + host of it (--offload-optimizer host moves the state from one "
              "to the other)\n");
  if (o.fit.empty()) return true;

  const std::size_t budget = parse_byte_count(o.fit);
  const optim::OptimizerOffload& offload = o.trainer.engine.zero.offload_optimizer;
  const std::string dir = offload.kind == optim::OptimizerOffload::Kind::disk ? offload.dir : "DIR";
  const std::size_t host_budget =
      o.fit_host.empty() ? std::numeric_limits<std::size_t>::max() : parse_byte_count(o.fit_host);
  const auto fits = model_zoo::plan_fitting(config, world, budget, dir, host_budget, data);
  const std::string host_fit = o.fit_host.empty()
                                   ? ""
                                   : " and --fit-host " + o.fit_host + " (" +
                                         human_bytes(static_cast<double>(host_budget)) + ")";
  std::fprintf(
      out,
      "\n--fit %s (%s)%s: %zu setting(s) fit, cheapest first (no offload, then host, then disk; "
      "then less recomputation, then less communication; bf16 optimizer state only where no "
      "fp32 state fits); the largest rank's reserved peak and the most host memory a rank "
      "holds, MiB; each line's settings replace the command's --strategy, --zero3-size, "
      "--prefetch, --activation-checkpointing, --offload-optimizer and --optimizer-state-dtype:\n",
      o.fit.c_str(), human_bytes(static_cast<double>(budget)).c_str(), host_fit.c_str(),
      fits.size());
  std::fprintf(out, "  %10s %10s  %s\n", "reserved", "host", "settings");
  for (const auto& f : fits)
    std::fprintf(out, "  %10s %10s  %s\n", mib(f.largest.reserved_peak).c_str(),
                 mib(f.host_peak).c_str(), f.settings.c_str());
  if (fits.empty())
    std::fprintf(out, "  none: use more ranks, a smaller batch or model, or more memory\n");
  return !fits.empty();
}

void check_plan_fits_memory(const TrainOptions& o) {
  const std::size_t limit = o.trainer.engine.zero.memory_limit;
  const bool cpu = o.device == "cpu";
  const LaunchInfo launch = detect_launch();
  const int world = o.ranks > 0 ? o.ranks : launch.size;
  // One process of a machine warns for its CPU ranks (below).
  const bool warns = cpu && launch.local_rank == 0;
  if ((limit == 0 && !warns) || world > model_zoo::kMaxPlannedRanks) return;
  const model_zoo::TrainerConfig config = trainer_config(o, 0);
  model_zoo::MemoryPlan plan;
  try {
    plan =
        model_zoo::plan_memory(config, world, model_zoo::kPlanSteps, data_memory_bytes(o, config));
  } catch (const std::exception&) {
    if (limit > 0) throw;
    return;  // only a warning hangs on it: the run's setup names what is wrong
  }
  const std::size_t reserved = plan.largest().reserved_peak;
  const std::string budget = pasteable_bytes(limit);
  // CPU streams other than --memory-limit's default came from a flag or the
  // environment (train_options.cpp): a refusal says which.
  const optim::CpuStreams streams =
      config.engine.zero.cpu_streams.value_or(optim::default_cpu_streams());
  const std::string streams_note =
      !cpu || streams == optim::CpuStreams::none
          ? std::string()
          : std::string("; its CPU streams are '") + optim::cpu_streams_name(streams) + "' (" +
                (config.engine.zero.cpu_streams ? "--cpu-streams" : "ZRT_CPU_STREAMS") +
                "), which hold more than none, --memory-limit's default";
  ZRT_CHECK_AS(ResourceError, limit == 0 || reserved <= limit,
               "this run does not fit in --memory-limit ", human_bytes(static_cast<double>(limit)),
               ": its plan reserves ", human_bytes(static_cast<double>(reserved)), " on rank ",
               plan.largest().rank, " (the same flags with --plan --fit ", budget,
               " list the strategies, recomputation and optimizer offload that fit)", streams_note);
  // CPU ranks hold all of it in this machine's memory, which its ranks
  // share: the local ranks (with one data set, Note [One data set per
  // process]), or each launched process's one rank (and data set).
  if (!warns) return;
  auto held = [](const model_zoo::RankMemoryPlan& r) { return r.reserved_peak + r.host_peak; };
  std::size_t need = 0;  // on this machine; the local ranks are this process's
  if (o.ranks > 0) {
    std::size_t data = 0;
    for (const auto& r : plan.ranks) {
      need += held(r) - r.host_at_peak.data;
      data = std::max(data, r.host_at_peak.data);
    }
    need += data;
  } else {
    need = static_cast<std::size_t>(launch.local_size) * held(plan.largest());
  }
  const AvailableMemory available = available_memory();
  const std::optional<MemoryShortfall> s =
      available.shortfall(need, o.ranks > 0 ? need : held(plan.largest()));
  if (!s) return;
  std::fprintf(
      stderr,
      "zrt-train: warning: this run's memory plan needs %s %s (%d rank(s) at their peaks), "
      "more than the %s available%s: %s; the same flags with --plan show what each rank "
      "holds, and with --plan --fit BYTES --fit-host BYTES the settings that fit\n",
      human_bytes(static_cast<double>(s->need)).c_str(),
      !s->in_process ? "on this machine"
      : o.ranks > 0  ? "in this process"
                     : "in each process",
      s->in_process || o.ranks > 0 ? std::max(o.ranks, 1) : launch.local_size,
      human_bytes(static_cast<double>(s->available)).c_str(),
      s->in_process ? available.bound_by().c_str() : "",
      s->in_process ? "its allocations will fail" : "the system may kill it");
}

}  // namespace zrt::train
