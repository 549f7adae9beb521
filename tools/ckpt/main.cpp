// zrt-ckpt: look into, verify, consolidate and reshard zrt checkpoints
// (Note [Checkpoint format]). See docs/checkpoints.md.
#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <set>

#include <unistd.h>

#include "tools/common/cli_rules.h"
#include "tools/common/environment.h"
#include "tools/common/report_error.h"
#include "tools/common/run_lock.h"
#include "tools/common/stop_signals.h"
#include "zrt/optim/checkpoint/checkpoint_reader.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/checkpoint/index_checksum.h"
#include "zrt/optim/checkpoint/offline_tools.h"
#include "zrt/runtime/io/kernel_filesystem.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/path_overlap.h"
#include "zrt/runtime/io/safetensors.h"

namespace zrt::ckpt {
namespace {

using namespace optim;

int info(const std::string& path) {
  optim::CheckpointReader reader(path);
  const optim::CheckpointIndex& x = reader.index();
  std::int64_t params = 0, tensors = 0;
  for (const optim::HandleRecord& h : x.handles)
    for (const optim::ParamRecord& p : h.params) params += shape_numel(p.shape), ++tensors;
  int files = 0;
  for (const optim::RankRecord& r : x.ranks) files += !r.file.empty();
  std::printf("checkpoint   %s\n", reader.step_dir().c_str());
  std::printf("format       zrt-checkpoint v%d\n", x.version);
  std::printf("step         %lld (the next step to train)\n", static_cast<long long>(x.step));
  std::printf("layout       %d rank(s), strategy %s, zero3 size %d, compute dtype %s\n",
              x.world_size, x.strategy.c_str(), x.zero3_size, x.dtype.c_str());
  std::printf("parameters   %lld elements in %lld tensors, %zu handles\n",
              static_cast<long long>(params), static_cast<long long>(tensors), x.handles.size());
  for (const optim::HandleRecord& h : x.handles)
    std::printf("  %-14s %zu params, %lld elements padded, %d zero1 shards of %lld\n",
                h.name.c_str(), h.params.size(), static_cast<long long>(h.numel_padded),
                h.zero1_size, static_cast<long long>(h.shard_numel()));
  std::printf("files        %d rank files, %.3f MB\n", files,
              static_cast<double>(x.total_bytes()) / 1e6);
  std::printf(
      "optimizer    step %lld, %lld skipped (%lld in a row), %s moments (saved f32)\n",
      static_cast<long long>(x.state.optimizer_step), static_cast<long long>(x.state.skipped_total),
      static_cast<long long>(x.state.consecutive_skips), dtype_name(x.state.optimizer_state_dtype));
  if (x.state.loss_scaler)
    std::printf("loss scaler  scale %g, growth tracker %lld, hysteresis left %d\n",
                x.state.loss_scaler->scale,
                static_cast<long long>(x.state.loss_scaler->growth_tracker),
                x.state.loss_scaler->hysteresis_left);
  std::printf("run          %s\n", x.run_json.c_str());
  return 0;
}

// Every tensor of the step's rank files against its checksum, and no stray file.
int verify_step(const std::string& path) {
  optim::CheckpointReader reader(path);
  const std::uint64_t bytes = reader.verify_all();
  // A file the index does not list (a rank file of another world size, a
  // copy) is no part of the step: a step holding one is not as it was saved.
  std::set<std::string> listed = {optim::kIndexFileName, optim::kIndexChecksumFileName};
  for (const optim::RankRecord& r : reader.index().ranks)
    if (!r.file.empty()) listed.insert(r.file);
  std::string strays;
  for (const auto& e : std::filesystem::directory_iterator(reader.step_dir()))
    if (!listed.count(e.path().filename().string()))
      strays += (strays.empty() ? "" : ", ") + e.path().filename().string();
  ZRT_CHECK_AS(CheckpointError, strays.empty(), reader.step_dir(),
               " is not as it was saved: it holds files its index does not list (", strays,
               "); move them out of the step directory");
  std::printf("zrt-ckpt: %s is intact: every tensor of %d rank(s) matches its checksum (%.3f MB)\n",
              reader.step_dir().c_str(), reader.index().world_size,
              static_cast<double>(bytes) / 1e6);
  return 0;
}

int verify(const std::string& path) {
  const std::string step = optim::resolve_checkpoint(path);  // the step `latest` names now
  try {
    return verify_step(path);
  } catch (const std::exception&) {
    // A run pruning its old steps (--keep-last) may remove the step while it
    // is read: say so, not what the missing file made fail.
    std::error_code ec;  // gone for sure: exists() said no without failing itself
    ZRT_CHECK_AS(CheckpointError, std::filesystem::exists(step, ec) || ec, step,
                 " was removed while it was verified (a run pruning its old steps, --keep-last); "
                 "verify again to check the newest");
    throw;
  }
}

// The files a command reads from `path` (a step directory, or a root whose
// `latest` names one), for Note [No output onto an input].
std::vector<NamedPath> checkpoint_inputs(const std::string& path) {
  std::vector<NamedPath> inputs = {{"the checkpoint", optim::resolve_checkpoint(path)}};
  const std::filesystem::path latest = std::filesystem::path(path) / "latest";
  if (std::filesystem::exists(latest))
    inputs.push_back({"the checkpoint's `latest`", latest.string()});
  return inputs;
}

// A model is its parameters' names and shapes, in order.
bool same_model(const CheckpointIndex& a, const CheckpointIndex& b) {
  std::vector<std::pair<std::string, Shape>> pa, pb;
  for (const HandleRecord& h : a.handles)
    for (const ParamRecord& p : h.params) pa.emplace_back(p.fqn, p.shape);
  for (const HandleRecord& h : b.handles)
    for (const ParamRecord& p : h.params) pb.emplace_back(p.fqn, p.shape);
  return pa == pb;
}

// reshard --out: never into the checkpoint read, never over a step already
// there, and into a non-empty directory only when it holds checkpoints of
// the same model (or --force says so).
void check_reshard_destination(const std::string& source, const std::string& out, bool force) {
  namespace fs = std::filesystem;
  CheckpointReader reader(source);
  const std::string step_dir = reader.step_dir();
  ZRT_CHECK_ARG(!path_is_within(out, step_dir), "--out ", out, " is inside the checkpoint read, ",
                step_dir);
  // Before any check that --force passes: it would be refused after them.
  ZRT_CHECK_ARG(!path_is_within(step_dir, out), "--out ", out, " holds the checkpoint read, ",
                step_dir, ": write the resharded step into another directory");
  optim::check_directory_outside_checkpoint_steps({"--out", out});  // --force too
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  ZRT_CHECK_ARG(fs::is_directory(out, ec), "--out ", out, " exists and is not a directory");
  // What an interrupted reshard or save left (step-N.tmp) is removed when
  // the step is begun, and the run lock a finished or interrupted writer
  // left is taken again (RunLock refuses a held one): a directory holding
  // only those is empty.
  bool empty = true;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    empty = empty && (optim::is_checkpoint_temporary(name) ||
                      (name == tools::kRunLockName && tools::is_run_lock_file(e.path().string())));
  }
  if (empty && !ec) return;  // one that cannot be listed goes through every check below
  const fs::path target = fs::path(out) / optim::step_dir_name(reader.index().step);
  const auto never_replace = [&] {
    ZRT_CHECK_ARG(!fs::exists(target, ec), "--out ", out, " already holds ",
                  target.filename().string(),
                  ": resharding never replaces a step (remove it first, or write elsewhere)");
  };
  const auto steps = optim::complete_steps(out);
  if (force) return never_replace();
  ZRT_CHECK_ARG(!steps.empty(), "--out ", out,
                " is a non-empty directory that holds no checkpoint steps; write into an empty or "
                "new directory, or "
                "pass --force");
  std::string other;
  try {
    other = optim::resolve_checkpoint(out);
  } catch (const CheckpointError&) {
    other = (fs::path(out) / optim::step_dir_name(steps.back())).string();
  }
  const CheckpointReader theirs(other);
  ZRT_CHECK_ARG(same_model(theirs.index(), reader.index()), "--out ", out,
                " holds checkpoints of another model (", other,
                "); its `latest` would move to this one. Write into an empty or new directory, or "
                "pass --force");
  // Its `latest` moves to the step written: a resume there would continue it.
  ZRT_CHECK_ARG(optim::run_identity(theirs.index()) == optim::run_identity(reader.index()),
                "--out ", out, " holds checkpoints of another run (another --seed), newest ", other,
                "; a --resume there would continue this one's step. Write into an empty or new "
                "directory, or pass --force");
  ZRT_CHECK_ARG(steps.back() <= reader.index().step, "--out ", out, " holds ",
                optim::step_dir_name(steps.back()), ", newer than ",
                optim::step_dir_name(reader.index().step),
                ": its `latest` would move back. "
                "Write into an empty or new directory, or pass --force");
  never_replace();
}

// Note [zrt-ckpt stops on a signal]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// SIGINT (Ctrl-C), SIGTERM or SIGHUP during export or reshard stops it before the
// next shard: what it wrote is removed (no hidden partial file or
// step-N.tmp the size of the model stays behind, and a retry needs no
// cleaning) and zrt-ckpt exits 128 + the signal number, saying so. A second
// signal exits at once (a copy of the first within half a second is not
// one: StopSignalTimes). info and verify write nothing and keep the default
// handling. The flags are the process-wide variables of zrt-ckpt: a
// signal handler can reach nothing else.
std::atomic<int> stop_signal{0};
tools::StopSignalTimes stop_signal_times;
static_assert(std::atomic<int>::is_always_lock_free, "the handler's flag must be lock-free");

extern "C" void on_stop_signal(int sig) {
  const auto kind = stop_signal_times.take();
  if (kind == tools::StopSignalTimes::Kind::second) _exit(128 + sig);
  if (kind == tools::StopSignalTimes::Kind::first) stop_signal.store(sig);
}

// Thrown between shards once a stop signal came; no std::exception, so no
// handler of errors on the way takes it for one.
struct Stopped {
  int sig;
};

void stop_if_signalled() {
  if (const int sig = stop_signal.load()) throw Stopped{sig};
}

}  // namespace
}  // namespace zrt::ckpt

int main(int argc, char** argv) {
  using namespace zrt;
  CLI::App app{"zrt-ckpt: inspect, verify, export and reshard zrt checkpoints"};
  app.require_subcommand(1);
  std::string path, out, strategy = "";
  int ranks = 0, zero3 = 0;
  bool force = false;
  auto* info = app.add_subcommand("info", "step, layout, sizes, training state and run flags");
  info->add_option("checkpoint", path, "a checkpoint directory (its `latest`) or a step directory")
      ->required();
  auto* verify = app.add_subcommand(
      "verify", "read every tensor and check its checksum; non-zero exit if any fails");
  verify
      ->add_option("checkpoint", path, "a checkpoint directory (its `latest`) or a step directory")
      ->required();
  auto* exp =
      app.add_subcommand("export", "write the whole fp32 parameters as one safetensors file");
  exp->add_option("checkpoint", path, "a checkpoint directory (its `latest`) or a step directory")
      ->required();
  exp->add_option("--out", out, "the safetensors file to write (Hugging Face GPT-2 names for gpt)")
      ->required();
  auto* resh =
      app.add_subcommand("reshard", "rewrite a checkpoint for another world size or strategy");
  resh->add_option("checkpoint", path, "a checkpoint directory (its `latest`) or a step directory")
      ->required();
  resh->add_option("--ranks", ranks, "the new world size")
      ->required()
      ->check(tools::whole_number(1, 65536));
  resh->add_option("--out", out, "the checkpoint directory to write the step into")->required();
  resh->add_option("--strategy", strategy, "the new strategy (default: the checkpoint's)")
      ->check(CLI::IsMember({"full", "grad-op", "no-shard", "hybrid", "layer-zero"}));
  resh->add_option("--zero3-size", zero3, "hybrid / layer-zero group size (0: the world)")
      ->check(tools::whole_number(0));
  resh->add_flag("--force", force,
                 "write into a non-empty --out anyway: other files, another run's steps, newer "
                 "steps; its `latest` then names the step written, older or another run's (a "
                 "step already there is still never replaced)");
  try {
    tools::check_command_line(app, argc, argv);
  } catch (const UserError& e) {
    tools::report_error("zrt-ckpt", e);
    std::fprintf(stderr, "Run with --help for more information.\n");
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    tools::report_error("zrt-ckpt", InvalidArgument(tools::parse_error_text(app, e)));
    std::fprintf(stderr, "Run with --help for more information.\n");
    return 2;
  }
  // The command line's own faults, and the environment, as zrt-train: exit 2.
  try {
    ZRT_CHECK_ARG(!path.empty(), "the checkpoint path is empty (an unset shell variable?)");
    ZRT_CHECK_ARG(!(*exp || *resh) || !out.empty(), "--out is empty (an unset shell variable?)");
    if (*exp || *resh) refuse_kernel_filesystem("--out", out);
    tools::check_environment("zrt-ckpt");  // Note [Environment variables]
  } catch (const UserError& e) {
    tools::report_error("zrt-ckpt", e);
    return 2;
  }
  // A checkpoint directory's `latest` file means that directory: every
  // check below (its `latest` among the inputs) then sees the directory.
  path = optim::checkpoint_root_of(path);
  try {
    if (*info) return ckpt::info(path);
    if (*verify) return ckpt::verify(path);
    tools::install_stop_handlers(ckpt::on_stop_signal);
    if (*exp) {
      try {  // a command-line error, exit 2; before any work
        check_output_file(out, "--out");
        check_output_clear_of_inputs({"--out", out}, ckpt::checkpoint_inputs(path));
        optim::check_output_outside_checkpoint_steps({"--out", out});
      } catch (const InvalidArgument& e) {
        tools::report_error("zrt-ckpt", e);
        return 2;
      }
      const optim::Exported e =
          zrt::optim::export_params(path, out, ckpt::stop_if_signalled);  // a shard at a time
      std::printf("zrt-ckpt: wrote %zu parameters of %s to %s\n", e.params, e.step_dir.c_str(),
                  out.c_str());
      return 0;
    }
    if (*resh) {
      if (strategy.empty()) strategy = zrt::optim::CheckpointReader(path).index().strategy;
      const auto s = optim::parse_strategy(strategy);
      ZRT_CHECK_ARG(s.has_value(), "unknown strategy '", strategy, "'");
      // The flags' combination and --out: a command-line error, exit 2, as
      // export's (a checkpoint that cannot be read fails, exit 1).
      try {
        ZRT_CHECK_ARG(resh->get_option("--zero3-size")->count() == 0 ||
                          *s == optim::ShardingStrategy::hybrid_shard ||
                          *s == optim::ShardingStrategy::layer_zero,
                      "reshard --zero3-size is read by --strategy hybrid and layer-zero only, not ",
                      optim::strategy_name(*s));
        ZRT_CHECK_ARG(zero3 == 0 || ranks % zero3 == 0, "reshard --zero3-size ", zero3,
                      " does not divide --ranks ", ranks, ": its groups would not tile the world");
        ckpt::check_reshard_destination(path, out, force);
        std::error_code made;
        std::filesystem::create_directories(out, made);
        ZRT_CHECK_ARG(!made, "reshard --out ", out, " cannot be created: ", made.message());
        ZRT_CHECK_ARG(::access(out.c_str(), W_OK) == 0, "reshard --out ", out,
                      " is not writable: ", std::strerror(errno));
      } catch (const InvalidArgument& e) {
        tools::report_error("zrt-ckpt", e);
        return 2;
      }
      // A zrt-train run in --out would save over the step written (Note
      // [Resuming never loses work]): one writer at a time.
      const tools::RunLock lock(out, "reshard --out", "zrt-ckpt");
      const std::string dir =
          zrt::optim::reshard_checkpoint(path, out, ranks, *s, zero3, ckpt::stop_if_signalled);
      std::printf("zrt-ckpt: wrote %s for %d rank(s), strategy %s\n", dir.c_str(), ranks,
                  optim::strategy_name(*s));
      return 0;
    }
  } catch (const ckpt::Stopped& stop) {
    std::fprintf(stderr, "zrt-ckpt: stopped by %s; %s %s\n",
                 stop.sig == SIGINT   ? "SIGINT"
                 : stop.sig == SIGHUP ? "SIGHUP"
                                      : "SIGTERM",
                 *exp ? "nothing was written to --out" : "no step was written into --out",
                 out.c_str());
    return 128 + stop.sig;
  } catch (const std::exception& e) {
    tools::report_error("zrt-ckpt", e);
    return 1;
  }
  return 0;
}
