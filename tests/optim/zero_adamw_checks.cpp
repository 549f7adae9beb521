#include "tests/optim/zero_adamw_checks.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "tests/support/rank_check.h"
#include "zrt/optim/flat_param/flat_param_handle.h"
#include "zrt/optim/flat_param/sharding_groups.h"
#include "zrt/optim/lr_schedule.h"
#include "zrt/optim/zero_adamw.h"

namespace zrt::testing {

namespace fs = std::filesystem;
using optim::ZeroAdamW;

namespace {

constexpr int kCleanSteps = 6;
constexpr double kGradQuantum = 1.0 / 1024;  // gradients are multiples of it: rank sums are exact
// Both sides compute in f32 and differ only in roundings of the norm and
// where PyTorch fuses a multiply-add; see check_close.
constexpr double kRtol = 1e-6;

// Matrices decay, vectors do not; odd sizes, a [1], and shards that split
// parameters at every world size up to 4.
const std::vector<Shape> kShapes = {{33, 31}, {31}, {1}, {7}, {3, 5}, {2, 3, 2}, {65}, {129, 8}};

void write_f32(const fs::path& path, const std::vector<std::vector<double>>& parts) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& part : parts)
    for (double x : part) {
      const float f = static_cast<float>(x);
      out.write(reinterpret_cast<const char*>(&f), sizeof f);
    }
  ZRT_EXPECT(out.good(), "cannot write ", path.string());
}

std::vector<std::vector<double>> read_f32(const fs::path& path, const std::vector<Shape>& shapes) {
  std::ifstream in(path, std::ios::binary);
  ZRT_EXPECT(in.good(), "missing reference output ", path.string());
  std::vector<std::vector<double>> out;
  for (const Shape& shape : shapes) {
    std::vector<float> buf(static_cast<std::size_t>(shape_numel(shape)));
    in.read(reinterpret_cast<char*>(buf.data()),
            static_cast<std::streamsize>(buf.size() * sizeof(float)));
    ZRT_EXPECT(in.gcount() == static_cast<std::streamsize>(buf.size() * sizeof(float)),
               "short reference output ", path.string());
    out.emplace_back(buf.begin(), buf.end());
  }
  return out;
}

// |got - want| <= kRtol * scale, with `scale` the largest magnitude of that
// state (m, v or parameters) over ALL tensors: norm-wise relative. m is a sum
// of terms of the gradients' size; where it cancels to nearly 0 (a small
// tensor whose entries all cancel) its fp32 rounding stays of the terms'
// size, so a per-tensor or per-element relative bound would be meaningless.
// The clip coefficient may also differ from the reference by an f32 ulp.
double largest_of(const std::vector<std::vector<double>>& tensors) {
  double largest = 0;
  for (const auto& t : tensors)
    for (double x : t) largest = std::max(largest, std::abs(x));
  return largest;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want,
                 std::int64_t want_offset, double scale, const std::string& what) {
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double w = want[static_cast<std::size_t>(want_offset) + e];
    ZRT_EXPECT(std::abs(got[e] - w) <= kRtol * scale, what, " element ",
               want_offset + static_cast<std::int64_t>(e), ": ", got[e], " != reference ", w,
               " (state scale ", scale, ")");
  }
}

// Bytes of a CPU tensor, for bit-for-bit comparisons (NaN-safe).
std::vector<std::byte> bytes_of(const Tensor& t) {
  std::vector<std::byte> out(t.nbytes());
  if (!out.empty()) std::memcpy(out.data(), t.data_ptr(), out.size());
  return out;
}

struct Run {
  optim::StrategyPlan plan;
  std::vector<std::unique_ptr<optim::FlatParamHandle>> handles;
  std::vector<std::size_t> first_param;  // global index of each handle's parameter 0
};

Run make_run(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
             const AdamWScenario& s, bool master_on_host = false) {
  Run run{optim::plan_strategy(strategy, world, zero3_size), {}, {}};
  const std::size_t bounds[] = {0, s.first_handle_params, s.shapes.size()};
  for (int k = 0; k < 2; ++k) {
    std::vector<optim::NamedParam> named;
    for (std::size_t i = bounds[k]; i < bounds[k + 1]; ++i)
      named.push_back({"layer" + std::to_string(i), s.shapes[i].size() >= 2 ? "weight" : "bias",
                       Tensor::from_doubles(s.init[i], DType::f32, Device::cpu(), s.shapes[i])});
    optim::FlatParamOptions o;
    o.name = "unit" + std::to_string(k);
    o.reshard_after_forward = run.plan.reshard_after_forward;
    o.reshard_after_backward = run.plan.reshard_after_backward;
    o.master_on_host = master_on_host;
    run.handles.push_back(
        std::make_unique<optim::FlatParamHandle>(std::move(named), run.plan.groups, o));
    run.first_param.push_back(bounds[k]);
  }
  return run;
}

// This rank's share of the gradient: the scenario's value plus an offset in
// whole quanta; the offsets of all ranks sum to zero exactly, so the
// all-rank average is exactly the scenario's gradient.
double rank_offset(std::mt19937_64& gen, int world_size, int rank) {
  std::uniform_int_distribution<int> quanta(-512, 512);
  double sum = 0, mine = 0;
  for (int r = 0; r + 1 < world_size; ++r) {
    const double q = quanta(gen) * kGradQuantum;
    sum += q;
    if (r == rank) mine = q;
  }
  return rank == world_size - 1 ? -sum : mine;
}

enum class Plant { none, inf, nan };

// One backward through both handles with this rank's gradients times
// `scale`; `plant` puts a non-finite value into the last rank's gradient.
void backward(Run& run, const CommPtr& world, const std::vector<std::vector<double>>& grads,
              std::uint64_t seed, double scale, Plant plant) {
  std::mt19937_64 gen(seed);
  for (std::size_t k = 0; k < run.handles.size(); ++k) {
    optim::FlatParamHandle& h = *run.handles[k];
    h.pre_forward();
    h.post_forward();
    h.pre_backward();
    for (std::size_t i = 0; i < h.num_params(); ++i) {
      const std::vector<double>& g = grads[run.first_param[k] + i];
      std::vector<double> mine(g.size());
      for (std::size_t e = 0; e < g.size(); ++e)
        mine[e] = (g[e] + rank_offset(gen, world->size(), world->rank())) * scale;
      if (world->rank() == world->size() - 1) {
        if (plant == Plant::inf && k == 1 && i == 1)
          mine[0] = std::numeric_limits<double>::infinity();
        if (plant == Plant::nan && k == 0 && i == 0)
          mine[3] = std::numeric_limits<double>::quiet_NaN();
      }
      Tensor view = h.grad(i);
      view.copy_(Tensor::from_doubles(mine, DType::f64, Device::cpu(), view.shape()));
    }
    h.post_backward(true);
  }
}

struct Snapshot {
  std::vector<std::vector<std::byte>> tensors;
  std::int64_t step;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const Run& run, const ZeroAdamW& opt) {
  Snapshot s{{}, opt.step_count()};
  for (std::size_t k = 0; k < run.handles.size(); ++k)
    for (const Tensor& t :
         {run.handles[k]->zero1_shard(), opt.exp_avg_shard(k), opt.exp_avg_sq_shard(k)})
      s.tensors.push_back(bytes_of(t));
  return s;
}

std::string where(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size) {
  return std::string(optim::strategy_name(strategy)) + " zero3=" + std::to_string(zero3_size) +
         " rank " + std::to_string(world->rank()) + "/" + std::to_string(world->size());
}

}  // namespace

AdamWScenario make_adamw_scenario(std::uint64_t seed) {
  AdamWScenario s;
  s.seed = seed;
  s.shapes = kShapes;
  s.first_handle_params = 3;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> quanta(-1024, 1024);
  for (const Shape& shape : s.shapes) {
    std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
    for (double& x : v) x = static_cast<float>(normal(gen));
    s.init.push_back(std::move(v));
  }
  const optim::WarmupCosineLr schedule(
      {.max_lr = 1e-2, .min_lr = 1e-3, .warmup_steps = 2, .total_steps = kCleanSteps});
  for (int step = 0; step < kCleanSteps; ++step) {
    s.lrs.push_back(schedule.lr(step));
    s.clipped.push_back(step == 3 || step == 4);  // norms ~2700 against max 100; ~27 otherwise
    std::vector<std::vector<double>> grads;
    for (const Shape& shape : s.shapes) {
      std::vector<double> g(static_cast<std::size_t>(shape_numel(shape)));
      for (double& x : g) x = quanta(gen) * kGradQuantum * (s.clipped.back() ? 100 : 1);
      grads.push_back(std::move(g));
    }
    s.grads.push_back(std::move(grads));
  }
  return s;
}

void run_torch_reference(const AdamWScenario& s, const fs::path& dir) {
  {
    std::ofstream cfg(dir / "config.txt");
    cfg.precision(17);
    cfg << s.grads.size() << ' ' << s.beta1 << ' ' << s.beta2 << ' ' << s.eps << ' '
        << s.weight_decay << ' ' << s.max_grad_norm << '\n';
    for (double lr : s.lrs) cfg << lr << ' ';
    cfg << '\n';
    for (const Shape& shape : s.shapes) {
      cfg << shape.size();
      for (auto d : shape) cfg << ' ' << d;
      cfg << '\n';
    }
    ZRT_EXPECT(cfg.good(), "cannot write ", (dir / "config.txt").string());
  }
  write_f32(dir / "param.bin", s.init);
  for (std::size_t k = 0; k < s.grads.size(); ++k)
    write_f32(dir / ("grad_" + std::to_string(k) + ".bin"), s.grads[k]);
  const std::string cmd = std::string(ZRT_PYTHON) + " " + ZRT_SOURCE_DIR +
                          "/tests/optim/zero_adamw_reference.py " + dir.string();
  const int rc = std::system(cmd.c_str());
  ZRT_EXPECT(rc != -1 && WIFEXITED(rc), "could not run `", cmd, "`");
  ZRT_EXPECT(WEXITSTATUS(rc) != 3, "the PyTorch reference needs torch and numpy importable by ",
             ZRT_PYTHON, " (Debian: apt install python3-torch)");
  ZRT_EXPECT(WEXITSTATUS(rc) == 0, "`", cmd, "` failed with exit code ", WEXITSTATUS(rc));
}

AdamWExpected read_torch_reference(const AdamWScenario& s, const fs::path& dir) {
  AdamWExpected e;
  e.params = read_f32(dir / "param_out.bin", s.shapes);
  e.exp_avg = read_f32(dir / "exp_avg_out.bin", s.shapes);
  e.exp_avg_sq = read_f32(dir / "exp_avg_sq_out.bin", s.shapes);
  std::ifstream norms(dir / "norms.txt");
  for (double x; norms >> x;) e.norms.push_back(x);
  ZRT_EXPECT(e.norms.size() == s.grads.size(), "reference wrote ", e.norms.size(), " norms for ",
             s.grads.size(), " steps");
  return e;
}

void check_zero_adamw(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                      const AdamWScenario& s, const AdamWExpected& expected) {
  const std::string at = where(world, strategy, zero3_size);
  Run run = make_run(world, strategy, zero3_size, s);
  optim::AdamWOptions options;
  options.beta1 = s.beta1;
  options.beta2 = s.beta2;
  options.eps = s.eps;
  options.weight_decay = s.weight_decay;
  options.max_grad_norm = s.max_grad_norm;
  options.max_consecutive_skips = 3;
  ZeroAdamW opt({run.handles[0].get(), run.handles[1].get()}, options);
  optim::DynamicLossScaler scaler({.init_scale = 256, .growth_interval = 3, .hysteresis = 2});

  std::uint64_t call = 0;
  for (int step = 0; step < kCleanSteps; ++step) {
    if (step == s.bad_before) {
      // Inf, then NaN, on the last rank only: every rank skips, nothing changes.
      for (int bad = 0; bad < 2; ++bad) {
        const Snapshot before = snapshot(run, opt);
        const double scale = scaler.scale();
        backward(run, world, s.grads[static_cast<std::size_t>(step)], s.seed + ++call, scale,
                 bad == 0 ? Plant::inf : Plant::nan);
        const optim::StepResult r = opt.step(s.lrs[static_cast<std::size_t>(step)], &scaler);
        ZRT_EXPECT(r.skipped && r.skipped_total == bad + 1 && r.consecutive_skips == bad + 1, at,
                   ": non-finite step ", bad, " not skipped and counted");
        ZRT_EXPECT(!std::isfinite(r.grad_norm) && r.loss_scale == scale, at,
                   ": skipped step reports norm ", r.grad_norm, ", scale ", r.loss_scale);
        ZRT_EXPECT(snapshot(run, opt) == before, at,
                   ": a skipped step changed parameters, m, v or the step count");
        // Hysteresis 2: the first overflow keeps the scale, the second halves it.
        ZRT_EXPECT(scaler.scale() == (bad == 0 ? scale : scale / 2), at, ": loss scale ",
                   scaler.scale(), " after overflow ", bad);
      }
    }
    const double scale = scaler.scale();
    backward(run, world, s.grads[static_cast<std::size_t>(step)], s.seed + ++call, scale,
             Plant::none);
    const optim::StepResult r = opt.step(s.lrs[static_cast<std::size_t>(step)], &scaler);
    const double want_norm = expected.norms[static_cast<std::size_t>(step)];
    ZRT_EXPECT(!r.skipped && r.step == step + 1 && r.consecutive_skips == 0 &&
                   r.skipped_total == 2 * (step >= s.bad_before),
               at, ": clean step ", step, " skipped=", r.skipped, " step=", r.step);
    ZRT_EXPECT(std::abs(r.grad_norm - want_norm) <= kRtol * want_norm, at, ": step ", step,
               " grad norm ", r.grad_norm, " != reference ", want_norm);
    ZRT_EXPECT((r.clip_coef < 1) == s.clipped[static_cast<std::size_t>(step)] &&
                   r.loss_scale == scale && r.lr == s.lrs[static_cast<std::size_t>(step)],
               at, ": step ", step, " clip_coef ", r.clip_coef, " loss_scale ", r.loss_scale);
    for (const auto& h : run.handles)
      ZRT_EXPECT(h->needs_param_sync(), at, ": handle not marked updated");
  }
  // Growth interval 3 after the backoff to 128: clean steps 2, 3, 4 grow it back.
  ZRT_EXPECT(scaler.scale() == 256, at, ": final loss scale ", scaler.scale());

  for (std::size_t k = 0; k < run.handles.size(); ++k) {
    optim::FlatParamHandle& h = *run.handles[k];
    for (std::size_t i = 0; i < h.num_params(); ++i) {
      const std::size_t gi = run.first_param[k] + i;
      const optim::ShardParamInfo& info = h.zero1_shard_infos()[i];
      const std::string name = at + " " + h.fqn(i);
      ZRT_EXPECT(opt.exp_avg(k, i).numel() == info.numel_in_shard, name, ": exp_avg view size");
      check_close(opt.exp_avg(k, i).to_doubles(), expected.exp_avg[gi], info.intra_param_start,
                  largest_of(expected.exp_avg), name + " exp_avg");
      check_close(opt.exp_avg_sq(k, i).to_doubles(), expected.exp_avg_sq[gi],
                  info.intra_param_start, largest_of(expected.exp_avg_sq), name + " exp_avg_sq");
      check_close(h.sharded_param(i).to_doubles(), expected.params[gi], info.intra_param_start,
                  largest_of(expected.params), name + " zero1 shard");
    }
    // The next unshard gathers the updated master.
    h.pre_forward();
    for (std::size_t i = 0; i < h.num_params(); ++i) {
      const std::size_t gi = run.first_param[k] + i;
      check_close(h.param(i).to_doubles(), expected.params[gi], 0, largest_of(expected.params),
                  at + " " + h.fqn(i));
    }
    h.post_forward();
  }
}

void check_skip_limit(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size) {
  const std::string at = where(world, strategy, zero3_size);
  const AdamWScenario s = make_adamw_scenario(7);
  Run run = make_run(world, strategy, zero3_size, s);
  optim::AdamWOptions options;
  options.max_consecutive_skips = 2;
  ZeroAdamW opt({run.handles[0].get(), run.handles[1].get()}, options);
  const std::vector<std::vector<double>>& grads = s.grads[0];
  // bad, clean, bad: the clean step resets the run of skips.
  backward(run, world, grads, 1, 1.0, Plant::nan);
  ZRT_EXPECT(opt.step(1e-3).skipped, at, ": NaN step not skipped");
  backward(run, world, grads, 2, 1.0, Plant::none);
  ZRT_EXPECT(!opt.step(1e-3).skipped, at, ": clean step skipped");
  backward(run, world, grads, 3, 1.0, Plant::inf);
  ZRT_EXPECT(opt.step(1e-3).consecutive_skips == 1, at,
             ": the clean step did not reset the skip run");
  // The second in a row throws, on every rank, and changes nothing.
  backward(run, world, grads, 4, 1.0, Plant::nan);
  const Snapshot before = snapshot(run, opt);
  bool threw = false;
  try {
    opt.step(1e-3);
  } catch (const optim::TooManySkippedSteps& e) {
    // Unscaled, no loss scale is named (the f16 engine's says the last one's).
    threw = std::string(e.what()).find("2 optimizer steps in a row") != std::string::npos &&
            std::string(e.what()).find("loss scale") == std::string::npos;
  }
  ZRT_EXPECT(threw, at,
             ": two skips in a row did not throw TooManySkippedSteps naming the count alone");
  ZRT_EXPECT(snapshot(run, opt) == before && opt.skipped_total() == 3 && opt.step_count() == 1, at,
             ": the throwing step changed state");
}

void check_settings_agree(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size) {
  const std::string at = where(world, strategy, zero3_size);
  const AdamWScenario s = make_adamw_scenario(11);
  const int n = world->size();
  for (const bool upper_half : {false, true})
    for (const std::string what : {"lr", "beta2", "step count", "decay policy"}) {
      const bool odd = upper_half ? world->rank() >= n / 2 : world->rank() == n - 1;
      Run run = make_run(world, strategy, zero3_size, s);
      optim::AdamWOptions options;
      if (odd && what == "beta2") options.beta2 = 0.99;
      if (odd && what == "decay policy")
        options.decays = [](const std::string&, const Shape&) {
          return true;  // vectors too
        };
      ZeroAdamW opt({run.handles[0].get(), run.handles[1].get()}, options);
      if (odd && what == "step count") opt.load_counters(1, 0, 0);
      const double lr = odd && what == "lr" ? 2e-3 : 1e-3;
      backward(run, world, s.grads[0], 1, 1.0, Plant::none);
      const Snapshot before = snapshot(run, opt);
      std::string error;
      try {
        opt.step(lr);
      } catch (const InvalidArgument& e) {
        error = e.what();
      }
      const std::string case_at =
          at + ", " + what + " differs on " + (upper_half ? "the upper half" : "the last rank");
      ZRT_EXPECT(error.find("the ranks step with different settings") != std::string::npos, case_at,
                 ": not refused (", error, ")");
      ZRT_EXPECT(snapshot(run, opt) == before, case_at, ": the refused step changed state");
      // The same settings step.
      ZeroAdamW same({run.handles[0].get(), run.handles[1].get()}, optim::AdamWOptions{});
      ZRT_EXPECT(!same.step(1e-3).skipped, case_at, ": agreeing ranks did not step");
    }
}

void run_final_state(const CommPtr& world, optim::ShardingStrategy strategy, int zero3_size,
                     const AdamWScenario& s, optim::AdamWOptions options,
                     const optim::OptimizerOffload& offload, AdamWFinal& out, std::mutex& mutex) {
  const std::string at = where(world, strategy, zero3_size);
  Run run =
      make_run(world, strategy, zero3_size, s, offload.kind == optim::OptimizerOffload::Kind::host);
  options.beta1 = s.beta1;
  options.beta2 = s.beta2;
  options.eps = s.eps;
  options.weight_decay = s.weight_decay;
  options.max_grad_norm = 0;
  ZeroAdamW opt({run.handles[0].get(), run.handles[1].get()}, options, offload);
  for (int step = 0; step < kCleanSteps; ++step) {
    backward(run, world, s.grads[static_cast<std::size_t>(step)], s.seed + 1000 + step, 1.0,
             Plant::none);
    opt.step(s.lrs[static_cast<std::size_t>(step)]);
  }
  for (const auto& h : run.handles) {
    h->options().stream.synchronize();
    h->master_stream().synchronize();
  }
  std::lock_guard<std::mutex> lock(mutex);
  for (std::vector<std::vector<double>>* v : {&out.params, &out.exp_avg, &out.exp_avg_sq}) {
    if (!v->empty()) continue;
    for (const Shape& shape : s.shapes)
      v->emplace_back(static_cast<std::size_t>(shape_numel(shape)),
                      std::numeric_limits<double>::quiet_NaN());
  }
  for (std::size_t k = 0; k < run.handles.size(); ++k) {
    const optim::FlatParamHandle& h = *run.handles[k];
    for (std::size_t i = 0; i < h.num_params(); ++i) {
      const std::size_t gi = run.first_param[k] + i;
      const std::int64_t start = h.zero1_shard_infos()[i].intra_param_start;
      const std::pair<Tensor, std::vector<double>*> parts[] = {
          {h.sharded_param(i), &out.params[gi]},
          {opt.exp_avg(k, i), &out.exp_avg[gi]},
          {opt.exp_avg_sq(k, i), &out.exp_avg_sq[gi]}};
      for (const auto& [t, whole] : parts) {
        ZRT_EXPECT(t.dtype() == (whole == &out.params[gi] ? DType::f32 : options.state_dtype), at,
                   ": ", t.str(), " is not the state dtype");
        const std::vector<double> got = t.to_doubles();
        for (std::size_t e = 0; e < got.size(); ++e) {
          double& dst = (*whole)[static_cast<std::size_t>(start) + e];
          ZRT_EXPECT(std::isnan(dst) || dst == got[e], at, ": replica of ", h.fqn(i), " element ",
                     start + static_cast<std::int64_t>(e), " holds ", got[e], ", another ", dst);
          dst = got[e];
        }
      }
    }
  }
}

}  // namespace zrt::testing
