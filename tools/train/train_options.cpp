#include "tools/train/train_options.h"
#include "tools/train/memory_plan_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>

#include "tools/common/cli_rules.h"
#include "tools/common/run_lock.h"
#include "tools/train/run_directory.h"
#include "tools/train/train_setup.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/model_zoo/data/data_files.h"
#include "zrt/model_zoo/trainer/memory_plan.h"
#include "zrt/optim/checkpoint/checkpoint_index.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/error.h"
#include "zrt/runtime/io/input_file.h"
#include "zrt/runtime/io/kernel_filesystem.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/path_overlap.h"

namespace zrt::train {

const char* dtype_flag(DType t) {
  for (const DTypeFlag& f : kDTypeFlags)
    if (f.dtype == t) return f.name;
  return dtype_name(t);
}

namespace {

// Plain string matching (std::regex would add 20 s to this file's compile
// under the sanitizers).
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Whole numbers separated by single commas: "64" or "64,32".
bool is_width_list(std::string_view v) {
  for (size_t start = 0;;) {
    const size_t comma = std::min(v.find(',', start), v.size());
    if (comma == start || !std::all_of(v.begin() + start, v.begin() + comma, is_digit))
      return false;
    if (comma == v.size()) return true;
    start = comma + 1;
  }
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// `text` with each whole-word `word` (at the start only, if `at_start`)
// spelled `name`: a config field's name become its flag's.
std::string rename_word(std::string text, std::string_view word, std::string_view name,
                        bool at_start) {
  for (size_t at = text.find(word); at != std::string::npos && (at == 0 || !at_start);
       at = text.find(word, at)) {
    const size_t end = at + word.size();
    if ((at == 0 || !is_word_char(text[at - 1])) &&
        (end == text.size() || !is_word_char(text[end]))) {
      text.replace(at, word.size(), name);
      at += name.size();
    } else {
      at = end;
    }
    if (at_start) break;
  }
  return text;
}

// A checkpoint directory that cannot be written fails now, not after training
// (made if missing). Its `latest`, which every save rewrites, must be a
// checkpoint's: a user's file of that name would be overwritten, a directory
// would fail the first save (unless `resume` reads it, which names those).
void check_checkpoint_dir(const std::string& dir, bool resume) {
  namespace fs = std::filesystem;
  refuse_kernel_filesystem("--checkpoint-dir", dir);  // before a directory is made there
  optim::check_directory_outside_checkpoint_steps({"--checkpoint-dir", dir});
  std::error_code ec;
  const fs::path latest = fs::path(dir) / "latest";
  if (!resume && fs::exists(latest, ec) && !fs::is_regular_file(latest, ec))
    ZRT_THROW(InvalidArgument, "--checkpoint-dir ", dir, " holds ",
              fs::is_directory(latest, ec) ? "a directory " : "something other than a file ",
              latest.string(),
              ", where each save records the newest step: rename it or name another directory");
  if (!resume && fs::exists(latest, ec)) {
    std::ifstream in(latest);
    std::string first;
    std::getline(in, first);
    ZRT_CHECK_ARG(optim::parse_step_dir_name(first).has_value(), "--checkpoint-dir ", dir,
                  " holds a file ", latest.string(),
                  " that names no checkpoint step: each save would overwrite it; rename it or "
                  "name another directory");
  }
  // Names a run writes there: a user's file of such a name (a copy of a
  // weights file named step-000001, say) would be destroyed by the save of
  // that step, or by the run's lock (Note [Resuming never loses work]).
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code kind;
    const std::string name = e.path().filename().string();
    if (optim::parse_step_dir_name(name) && !e.is_directory(kind))
      ZRT_THROW(InvalidArgument, "--checkpoint-dir ", dir, " holds ", e.path().string(),
                ", which is not a checkpoint step but is named like one: the save of that step "
                "would destroy it; rename it or name another directory");
    if (name == tools::kRunLockName)
      ZRT_CHECK_ARG(tools::is_run_lock_file(e.path().string()), "--checkpoint-dir ", dir, " holds ",
                    e.path().string(),
                    ", which is not a zrt-train run lock: the run would overwrite it; rename it "
                    "or name another directory");
  }
  ec.clear();
  fs::create_directories(dir, ec);
  ZRT_CHECK_ARG(!ec && fs::is_directory(dir), "--checkpoint-dir ", dir,
                " cannot be created: ", ec ? ec.message() : "it exists and is not a directory");
  // A file written there, and why not: a full disk is not a permission.
  const fs::path probe = fs::path(dir) / (".zrt-write-probe-" + std::to_string(::getpid()));
  int error = 0;
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = errno;
  } else {
    errno = 0;
    if (::write(fd, "probe", 5) != 5) error = errno != 0 ? errno : ENOSPC;  // short: full
    if (::close(fd) != 0 && error == 0) error = errno;  // NFS may tell only here
    fs::remove(probe, ec);
  }
  if (error == ENOSPC || error == EDQUOT)
    ZRT_THROW(ResourceError, "not enough free disk space: --checkpoint-dir ", dir,
              ": its filesystem has no room for a file (", std::strerror(error), ")");
  ZRT_CHECK_ARG(error == 0, "--checkpoint-dir ", dir, " is not writable (", std::strerror(error),
                ")");
}

// Validators whose messages name the rule, not a floating-point range. NaN
// and infinities are not numbers a flag may take.
CLI::Validator number_rule(bool (*ok)(double), const char* rule, const char* noun, const char* name,
                           bool integer_flag = true) {
  return CLI::Validator(
      [ok, rule, noun, integer_flag](std::string& v) {
        const char* begin = v.c_str();
        char* end = nullptr;
        errno = 0;
        const double x = std::strtod(begin, &end);
        if (end == begin) return std::string("must be ") + noun + " (got " + v + ")";
        // Past a double's range either way (1e400, 1e-400); a subnormal
        // (1e-310) is a number, and the rule judges it.
        if (errno == ERANGE && std::isinf(x))
          return std::string("out of range (got ") + v +
                 "; a number's magnitude is at most about 1.8e308)";
        if (errno == ERANGE && x == 0)
          return std::string("out of range (got ") + v +
                 "; a nonzero number's magnitude is at least about 4.9e-324)";
        if (!std::isfinite(x)) return std::string("must be finite (got ") + v + ")";
        // A whole number outside 64 bits would saturate in a 64-bit flag
        // (decimal: check_command_line refused base prefixes before).
        if (integer_flag && tools::is_whole_number(v)) {
          errno = 0;
          (void)std::strtoll(v.c_str(), nullptr, 10);
          if (errno == ERANGE)  // a negative one breaks the rule anyway
            return ok(x) ? std::string("is out of range for a whole number (got ") + v + ")"
                         : std::string(rule) + " (got " + v + ")";
        }
        if (!ok(x)) return std::string(rule) + " (got " + v + ")";
        // -0 too (where added by transform): no "lr -0.00e+00". Only a value
        // read whole: "0,001" stays for the conversion to refuse.
        if (x == 0 && *end == '\0') v = "0";
        return std::string();
      },
      name);
}
const CLI::Validator kPositive = number_rule([](double x) { return x > 0; }, "must be positive",
                                             "a positive number", "POSITIVE");
const CLI::Validator kNonNegative = number_rule([](double x) { return x >= 0; },
                                                "must not be negative", "a number", "NON-NEGATIVE");
// The same for a flag of a real number, where 1e20 written out is a value;
// added by transform, so that -0 is read as 0.
const CLI::Validator kNonNegativeReal = number_rule(
    [](double x) { return x >= 0; }, "must not be negative", "a number", "NON-NEGATIVE", false);

// A whole number from 0 to 2^64 - 1: the integer parser would wrap -1 and
// saturate what is larger.
const CLI::Validator kSeed(
    [](std::string& v) {
      const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) return "must be a whole number from 0 to 2^64 - 1 (got " + v + ")";
      try {
        (void)std::stoull(v);
      } catch (const std::exception&) {
        return "is above 2^64 - 1 (got " + v + ")";
      }
      return std::string();
    },
    "SEED");

bool given(const CLI::App& app, const char* flag) { return app.get_option(flag)->count() > 0; }

// A flag that takes one of `names` and sets `target` to the value it names,
// straight into the field of the layer that reads it.
template <class T>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, T& target,
                        std::vector<std::pair<std::string, T>> names, const std::string& help) {
  std::vector<std::string> keys;
  std::string current;
  for (const auto& [name, value] : names) {
    keys.push_back(name);
    if (value == target && current.empty()) current = name;
  }
  return app
      .add_option_function<std::string>(
          flag,
          [&target, names](const std::string& v) {
            for (const auto& [name, value] : names)
              if (name == v) target = value;
          },
          help)
      ->check(CLI::IsMember(keys))
      ->default_str(current);
}

// A flag whose text `parse` turns into `target`, straight into the layer's
// field; parse's InvalidArgument is the flag's error.
template <class T, class Parse>
CLI::Option* add_parsed(CLI::App& app, const std::string& flag, T& target, Parse parse,
                        const std::string& help) {
  CLI::Option* opt =
      app.add_option_function<std::string>(
             flag, [&target, parse](const std::string& v) { target = parse(v); }, help)
          ->check([parse](const std::string& v) {
            try {
              parse(v);
              return std::string();
            } catch (const InvalidArgument& e) {
              return std::string(e.what());
            }
          });
  if constexpr (requires { target.str(); }) opt->default_str(target.str());
  return opt;
}

std::vector<std::pair<std::string, optim::ShardingStrategy>> strategy_flags() {
  using S = optim::ShardingStrategy;
  std::vector<std::pair<std::string, S>> out;
  for (S s : {S::full_shard, S::shard_grad_op, S::no_shard, S::hybrid_shard, S::layer_zero})
    out.emplace_back(optim::strategy_name(s), s);
  return out;
}

// Every flag's value (given, else its default) by flag name.
std::map<std::string, std::string> parsed_flag_values(const CLI::App& app) {
  std::map<std::string, std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_name() == "--help") continue;
    std::string value;
    if (opt->get_expected_max() == 0)  // a flag: given or not
      value = opt->count() > 0 ? "true" : "false";
    else if (opt->count() == 0)
      value = opt->get_default_str();
    else
      for (const std::string& r : opt->results()) value += (value.empty() ? "" : ",") + r;
    out[opt->get_name()] = value;
  }
  return out;
}

// Flags that only one model kind, strategy or launcher reads are an error
// elsewhere rather than silently ignored.
void check_flag_combinations(const CLI::App& app, const TrainOptions& o) {
  const std::vector<const char*> gpt_only = {"--n-layer",    "--n-head",      "--n-embd",
                                             "--vocab-size", "--vocab-align", "--block-size",
                                             "--seq-len",    "--head-unit"};
  const std::vector<const char*> mlp_only = {"--hidden", "--activation"};
  for (const char* f : o.trainer.model.kind == "gpt" ? mlp_only : gpt_only)
    if (given(app, f))
      ZRT_THROW(InvalidArgument, f, " is a flag of the other model kind: --model is ",
                o.trainer.model.kind);
  using S = optim::ShardingStrategy;
  const S strategy = o.trainer.engine.zero.strategy;
  ZRT_CHECK_ARG(
      !given(app, "--zero3-size") || strategy == S::hybrid_shard || strategy == S::layer_zero,
      "--zero3-size is read by --strategy hybrid and layer-zero only, not ",
      optim::strategy_name(strategy));
  const std::int64_t zero3 = o.trainer.engine.zero.zero3_size;
  const std::int64_t world = o.ranks > 0 ? o.ranks : detect_launch().size;
  ZRT_CHECK_ARG(zero3 == 0 || world % zero3 == 0, "--zero3-size ", zero3,
                " does not divide the world of ", world,
                o.ranks > 0 ? " ranks (--ranks)"
                : world > 1 ? " ranks (the launcher's)"
                            : " rank (a single process: add --ranks N or launch with mpirun)",
                ": its groups would not tile it");
  if (const LaunchInfo launch = detect_launch();
      launch.launcher == Launcher::torchrun && launch.size > 1 && o.ranks == 0)  // else below
    ZRT_CHECK_ARG(o.device == "cuda", "this process is rank ", launch.rank, " of ", launch.size,
                  " launched torchrun-style (RANK and WORLD_SIZE are set), whose world is NCCL "
                  "over CUDA devices: add --device cuda, or run CPU ranks with mpirun or --ranks");
  if (o.transport == "mpi" && !o.plan) {  // --plan moves nothing
    const LaunchInfo launch = detect_launch();
    // Alone, it would carry nothing: a forgotten `mpirun -np N` trains one rank.
    ZRT_CHECK_ARG(launch.launcher == Launcher::mpirun || launch.launcher == Launcher::slurm,
                  "--transport mpi carries the collectives of a world launched by mpirun or srun; "
                  "this process is ",
                  launch.launcher == Launcher::torchrun ? "launched torchrun-style (NCCL)"
                                                        : "not launched by either",
                  o.ranks > 0 ? " (--ranks starts local ranks, which share memory)"
                              : " (alone it would train one rank)",
                  ": launch it with mpirun -np N, or drop --transport mpi");
  }
  if (o.ranks > 0) {
    const LaunchInfo launch = detect_launch();
    ZRT_CHECK_ARG(launch.launcher == Launcher::single, "--ranks ", o.ranks,
                  " starts local ranks, but this process is ", "already one of ", launch.size,
                  " ranks launched by ", launcher_name(launch.launcher),
                  ": drop --ranks (the launcher sets the world size)");
    ZRT_CHECK_ARG(o.ranks <= kMaxLocalRanks, "--ranks ", o.ranks, " is more than the ",
                  kMaxLocalRanks,
                  " local ranks one process runs; launch processes with mpirun instead");
  }
  const optim::OptimizerOffload& offload = o.trainer.engine.zero.offload_optimizer;
  check_offload_dir(offload);
  if (offload.kind == optim::OptimizerOffload::Kind::host && o.device == "cpu" &&
      o.trainer.engine.zero.memory_limit == 0)
    std::cerr << "zrt-train: note: --offload-optimizer host saves no memory on --device cpu "
                 "without --memory-limit (host memory is the device's): the same numbers, the "
                 "state outside the caching allocator (mem_peak)\n";
  // Gradients are offloaded only between the micro-batches of a step, and
  // (--head-unit) a tie's gradient between its user's and owner's backward.
  if (o.trainer.engine.zero.grad_reduce.offload && o.trainer.micro_batches == 1 &&
      !o.trainer.model.head_unit)
    std::cerr << "zrt-train: note: --offload-grads keeps gradients in host memory between "
                 "micro-batches: with --micro-batches 1 there are none to keep, and it changes "
                 "nothing\n";
  // Casts and quantization act on collectives within groups of more than
  // one rank, prefetch on gathers (Note [Quantized gradient reduce-scatter],
  // Note [Quantized parameter gather]).
  {
    const optim::ZeroModuleOptions& zero = o.trainer.engine.zero;
    const int world = o.ranks > 0 ? o.ranks : detect_launch().size;
    const optim::StrategyGroups groups =
        optim::strategy_groups(zero.strategy, world, zero.zero3_size > 0 ? zero.zero3_size : world);
    // Shards of one rank (zero3 groups are never larger than zero1's;
    // layer-zero with zero3 groups of 1 still gathers its updated shards).
    if (groups.zero1_size == 1)
      for (const char* flag : {"--reduce-dtype", "--gather-dtype", "--prefetch"})
        if (given(app, flag))
          std::cerr << "zrt-train: note: " << flag << " changes nothing with " << world
                    << " rank(s) and --strategy " << optim::strategy_name(zero.strategy)
                    << ": no gradient is reduce-scattered and no parameter gathered across ranks\n";
  }
  if (o.tf32 && o.device == "cpu")
    std::cerr << "zrt-train: note: --tf32 changes nothing on --device cpu (its fp32 GEMMs are "
                 "fp32)\n";
  if (o.plan) {  // --plan trains nothing, so writes nothing
    std::string unwritten;
    for (const auto& [flag, value] : {std::pair{"--save", &o.save},
                                      {"--metrics", &o.metrics},
                                      {"--trace", &o.trace},
                                      {"--checkpoint-dir", &o.checkpoint_dir}})
      if (!value->empty()) unwritten += (unwritten.empty() ? "" : ", ") + std::string(flag);
    if (!unwritten.empty())
      std::cerr << "zrt-train: note: --plan trains nothing and writes nothing: " << unwritten
                << " ignored\n";
  }
  const double lr = o.trainer.schedule.max_lr, wd = o.trainer.engine.zero.adamw.weight_decay;
  if (weight_decay_too_large(lr, wd))
    std::cerr << "zrt-train: warning: --weight-decay " << wd << " at --lr " << lr << " takes "
              << lr * wd
              << " of each matrix off it every step (AdamW's decoupled decay, lr x weight decay; "
                 "1 or more flips its sign): typical weight decays are 0.01..0.1\n";
  if (o.trainer.schedule.max_lr > 1.0)
    std::cerr << "zrt-train: warning: --lr " << o.trainer.schedule.max_lr
              << " is far above a useful AdamW learning rate (1e-4..1e-2)\n";
}

// Output files must not overwrite an input, and their directory must be
// writable now, before any training.
// The checkpoint --resume reads, resolved now so its files are inputs to
// protect; empty when it starts fresh (no `latest` yet) or is not asked for.
std::vector<NamedPath> resumed_checkpoint_inputs(const TrainOptions& o) {
  namespace fs = std::filesystem;
  if (!o.resume) return {};
  const std::string path = o.resume_from.empty() ? o.checkpoint_dir : o.resume_from;
  std::vector<NamedPath> inputs;
  if (fs::exists(fs::path(path) / "latest"))
    inputs.push_back(
        {"the `latest` file of the resumed directory", (fs::path(path) / "latest").string()});
  try {
    inputs.push_back({"the resumed checkpoint", optim::resolve_checkpoint(path)});
  } catch (const CheckpointError&) {
    // A fresh start, or a bad path the resume names later with the reason.
  }
  return inputs;
}

// Whether `file` is one of the entries --checkpoint-dir manages (`latest`, a
// step directory or what is in one, a temporary, the run lock): checkpoints
// would overwrite or prune it.
bool in_checkpoint_entries(const std::string& file, const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  if (checkpoint_dir.empty() || !path_is_within(file, checkpoint_dir)) return false;
  const fs::path rel =
      fs::path(resolved_path(file)).lexically_relative(resolved_path(checkpoint_dir));
  const std::string first = rel.empty() ? std::string() : rel.begin()->string();
  return first.empty() || first == "." || first.starts_with("latest") ||
         first.starts_with("step-") || first.starts_with("abandoned-") ||
         first == tools::kRunLockName;
}

}  // namespace

std::string trace_path(const std::string& path, int rank, int size) {
  if (size == 1) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() /
          (p.stem().string() + ".rank-" + std::to_string(rank) + p.extension().string()))
      .string();
}

namespace {

void check_outputs(const TrainOptions& o) {
  namespace fs = std::filesystem;
  const int world = o.ranks > 0 ? o.ranks : std::max(1, detect_launch().size);
  // Each of several ranks writes a trace of its own: every one is an output.
  std::vector<std::string> traces;
  if (!o.trace.empty() && !names_a_stream(o.trace))
    for (int r = 0; r < world; ++r) traces.push_back(trace_path(o.trace, r, world));
  std::vector<std::pair<std::string, const std::string*>> outputs = {
      {"--save", &o.save}, {"--metrics", &o.metrics}, {"--trace", &o.trace}};
  if (world > 1) {
    outputs.pop_back();  // the file named is none of them
    for (int r = 0; r < static_cast<int>(traces.size()); ++r)
      outputs.emplace_back("--trace (rank " + std::to_string(r) + "'s)", &traces[r]);
  }
  std::vector<NamedPath> inputs = {{"the --data file", o.data},
                                   {"the --init-from file", o.trainer.init_from}};
  for (NamedPath& in : resumed_checkpoint_inputs(o)) inputs.push_back(std::move(in));
  for (const auto& [out_flag, out] : outputs) {
    if (out->empty()) continue;
    // --save is written whole and renamed into place: a regular file only,
    // through links (Note [Outputs write through links, never over
    // devices]). --metrics and --trace append as they go and may be streams.
    if (out != &o.save && names_a_stream(*out)) continue;  // /dev/stdout, /dev/null, a FIFO
    const fs::path target = check_output_file(*out, out_flag);
    check_output_clear_of_inputs({out_flag, *out}, inputs);  // Note [No output onto an input]
    ZRT_CHECK_ARG(!in_checkpoint_entries(target.string(), o.checkpoint_dir), out_flag, " ", *out,
                  " is among the checkpoints of --checkpoint-dir ", o.checkpoint_dir,
                  ", which saving and pruning overwrite and remove");
    optim::check_output_outside_checkpoint_steps({out_flag, *out});
  }
  // Several ranks write T.rank-R.json beside T: beside a stream, names in
  // /dev. So does /dev/stdout redirected to a file, a regular file by then
  // (/dev/shm, a directory of files, is fine).
  const fs::path rank_dir =
      o.trace.empty() ? fs::path() : fs::absolute(o.trace).lexically_normal().parent_path();
  const bool device_dir =
      rank_dir == "/dev" || rank_dir == "/dev/fd" || rank_dir.string().rfind("/proc/", 0) == 0;
  ZRT_CHECK_ARG(o.trace.empty() || world == 1 || (!names_a_stream(o.trace) && !device_dir),
                "--trace ", o.trace,
                " is a stream, but each of several ranks writes a trace of its own (",
                trace_path(o.trace, 0, world), " for rank 0); name a file");
  // Two outputs on one file: one would overwrite the other. The ranks'
  // traces differ by name but may be one file through a link.
  // Each resolved once (one per rank's trace: a world of many ranks).
  std::vector<std::string> targets;
  for (const auto& [flag, out] : outputs)  // through links, dangling ones too
    targets.push_back(out->empty() || names_a_stream(*out)
                          ? std::string()
                          : resolved_path(output_file_target(*out, flag).string()));
  for (std::size_t a = 0; a < outputs.size(); ++a)
    for (std::size_t b = a + 1; b < outputs.size(); ++b) {
      const std::string& x = *outputs[a].second;
      if (targets[a].empty() || targets[b].empty()) continue;
      std::error_code ec;  // hard links of one file: two names, one inode
      const bool linked = fs::exists(targets[a], ec) && fs::exists(targets[b], ec) &&
                          fs::equivalent(targets[a], targets[b], ec);
      ZRT_CHECK_ARG(targets[a] != targets[b] && !linked, outputs[a].first, " and ",
                    outputs[b].first, " name the same file ", x,
                    linked ? " (" + *outputs[b].second + " is a hard link of it)" : std::string(),
                    ": give each output a file of its own");
    }
  // Steps written into the checkpoint being read would replace it.
  if (!o.checkpoint_dir.empty())
    for (const NamedPath& in : inputs)
      ZRT_CHECK_ARG(in.path.empty() || !path_is_within(o.checkpoint_dir, in.path),
                    "--checkpoint-dir ", o.checkpoint_dir, " is inside ", in.what, " ", in.path,
                    ": saving would write into it");
}

// A model dimension the preset has unless the flag overrides it.
CLI::Option* add_override(CLI::App& app, const std::string& flag,
                          std::optional<std::int64_t>& target, const std::string& help,
                          const std::string& otherwise = "the preset's") {
  return app
      .add_option_function<std::int64_t>(
          flag, [&target](std::int64_t v) { target = v; }, help + " (default: " + otherwise + ")")
      ->check(kPositive);
}

// The model: its kind, preset and overrides.
void add_model_flags(CLI::App& app, TrainOptions& o) {
  model_zoo::ModelConfig& m = o.trainer.model;
  app.add_option("--model", m.kind, "model kind")->check(CLI::IsMember({"gpt", "mlp"}));
  app.add_option("--preset", m.preset, "model preset (gpt: tiny, small, gpt2-124m; mlp: tiny)");
  // Bounded so that a typo cannot build millions of layers' definitions
  // (about 2 KB each) before the memory check refuses the model.
  add_override(app, "--n-layer", m.n_layer, "gpt: transformer blocks")
      ->check(tools::whole_number(1, 1 << 16));
  add_override(app, "--n-head", m.n_head, "gpt: attention heads");
  add_override(app, "--n-embd", m.n_embd, "gpt: embedding width");
  add_override(app, "--vocab-size", m.vocab_size, "gpt: vocabulary size");
  app.add_option("--vocab-align", m.vocab_align,
                 "gpt: the token embedding and LM head are padded inside the model to a multiple "
                 "of this many rows, for aligned GEMMs (1: no padding); data, checkpoints and "
                 "weight files keep --vocab-size")
      ->check(tools::whole_number(1, 1 << 20));
  add_override(app, "--block-size", m.block_size,
               "gpt: positions of the position embedding, >= --seq-len",
               "the preset's, raised to --seq-len");
  app.add_flag("--head-unit", m.head_unit,
               "gpt: ln_f and the LM head in a wrap unit of their own, the head tied across units "
               "to the token "
               "embedding (the same numbers as the default layout when --clip is 0)");
  app.add_option_function<std::vector<std::int64_t>>(
         "--hidden", [&m](const std::vector<std::int64_t>& v) { m.hidden = v; },
         "mlp: hidden widths, e.g. 64,64")
      ->delimiter(',');
  app.add_option_function<std::string>(
         "--activation", [&m](const std::string& v) { m.activation = v; },
         "mlp: activation (default: gelu)")
      ->check(CLI::IsMember({"gelu", "relu"}));
}

// The data, the batch and the learning-rate schedule.
void add_schedule_flags(CLI::App& app, TrainOptions& o) {
  model_zoo::TrainerConfig& t = o.trainer;
  app.add_option("--data", o.data,
                 "text file (bytes), llm.c .bin tokens, or (mlp) safetensors with x [N,d_in] f32 "
                 "and y [N] i64; "
                 "not given: the embedded default dataset");
  app.add_option("--steps", t.steps, "optimizer steps")->check(kPositive);
  // A batch and a sequence are dimensions of tensors: int32, as the model's are.
  app.add_option("--batch-size", t.batch_size, "global sequences (gpt) or rows (mlp) per step")
      ->check(tools::whole_number(1, 2147483647));
  app.add_option("--micro-batches", t.micro_batches, "micro-batches per rank per step")
      ->check(tools::whole_number(1, 2147483647));
  app.add_option("--seq-len", t.seq_len, "gpt: tokens per sequence")
      ->check(tools::whole_number(1, 2147483647));
  app.add_option("--lr", t.schedule.max_lr, "peak learning rate")->transform(kNonNegativeReal);
  app.add_option("--min-lr", t.schedule.min_lr,
                 "learning rate at the end of the cosine decay (default: --lr / 10)")
      ->transform(kNonNegativeReal);
  app.add_option("--warmup", t.schedule.warmup_steps,
                 "linear warm-up steps (default: 5, or --steps if fewer)")
      ->check(kNonNegative);
}

// AdamW's settings and the seed, straight into the engine's options.
void add_optimizer_flags(CLI::App& app, TrainOptions& o) {
  // The optimizer's flags follow its own rule (optim::check_adamw_options), checked below.
  optim::AdamWOptions& adamw = o.trainer.engine.zero.adamw;
  app.add_option("--weight-decay", adamw.weight_decay,
                 "AdamW decoupled weight decay (2-D+ parameters only)");
  app.add_option("--clip", adamw.max_grad_norm, "max global gradient L2 norm (0: off)");
  app.add_option("--max-skipped-steps", adamw.max_consecutive_skips,
                 "stop with an error after N optimizer steps in a row skipped for non-finite "
                 "gradients (0: never)")
      ->check(kNonNegative);
  app.add_option("--beta1", adamw.beta1, "AdamW beta1, in [0, 1)");
  app.add_option("--beta2", adamw.beta2, "AdamW beta2, in [0, 1)");
  app.add_option("--eps", adamw.eps, "AdamW epsilon");
  add_choice(app, "--optimizer-state-dtype", adamw.state_dtype,
             {{"fp32", DType::f32}, {"bf16", DType::bf16}},
             "AdamW's m and v: fp32, or bf16 with stochastic rounding (12 instead of 16 bytes "
             "per parameter; the fp32 master stays)");
  app.add_option("--seed", o.trainer.engine.seed, "initialisation seed, 0 to 2^64 - 1")
      ->check(kSeed);
}

// Precision, recomputation and CPU streams.
void add_precision_flags(CLI::App& app, TrainOptions& o) {
  optim::ZeroModuleOptions& zero = o.trainer.engine.zero;
  std::vector<std::pair<std::string, DType>> dtypes;
  for (const DTypeFlag& f : kDTypeFlags) dtypes.emplace_back(f.name, f.dtype);
  add_choice(app, "--dtype", zero.dtype, dtypes, "compute dtype");
  add_choice(app, "--reduce-dtype", zero.grad_reduce.dtype, reduce_dtype_flags(),
             "what the gradient reduce-scatter moves: fp32, bf16, fp16 (the fp32 gradient cast "
             "down and back), int8 or int4 (each rank's gradient quantized blockwise once, "
             "an fp32 scale per 256 or 64 elements, exchanged all-to-all and summed in fp32 "
             "on arrival: about 1/4 and 1/7 of fp32's bytes; int4 costs accuracy)");
  add_choice(app, "--gather-dtype", zero.gather.dtype, gather_dtype_flags(),
             "what the parameter all-gathers move: compute (the --dtype values) or int8 "
             "(blockwise int8 with an fp32 scale per 256 elements, about 1/4 of fp32's bytes "
             "and 1/2 of bf16's; the fp32 master and checkpoints are unchanged)");
  app.add_option("--prefetch", o.trainer.engine.prefetch,
                 "units all-gathered ahead of their stage (0: none, less memory)")
      ->check(tools::whole_number(0, 2));
  add_parsed(app, "--activation-checkpointing", o.trainer.engine.checkpointing,
             model_zoo::parse_activation_checkpointing,
             "blocks that keep only their input and run forward again in backward: none, blocks "
             "(all), every:N (one in N); less activation memory for about a third more compute");
  app.add_option_function<std::string>(
         "--cpu-streams",
         [&zero](const std::string& v) { zero.cpu_streams = optim::parse_cpu_streams(v); },
         "on cpu: none (all on the rank's thread), comm (collectives on a thread of their own, "
         "overlapping compute; the default, or ZRT_CPU_STREAMS; none with --memory-limit unless "
         "ZRT_CPU_STREAMS is set), all "
         "(compute asynchronous too)")
      ->check(CLI::IsMember({"none", "comm", "all"}));
}

// Devices, transports, ranks and sharding.
void add_placement_flags(CLI::App& app, TrainOptions& o) {
  optim::ZeroModuleOptions& zero = o.trainer.engine.zero;
  app.add_option("--device", o.device, "cpu or cuda (cuda:local_rank per rank)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--transport", o.transport,
                 "what carries an mpirun/srun world's collectives: auto (NCCL for --device cuda "
                 "when built with it, "
                 "else MPI), mpi (CUDA tensors staged through host memory) or nccl (MPI only "
                 "shares its id); "
                 "torchrun launches are NCCL")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}));
  add_choice(app, "--strategy", zero.strategy, strategy_flags(), "sharding strategy");
  app.add_option("--zero3-size", zero.zero3_size, "hybrid/layer-zero: zero3 group size (0: world)")
      ->check(kNonNegative);
  add_parsed(app, "--offload-optimizer", zero.offload_optimizer, optim::parse_optimizer_offload,
             "where AdamW's m and v live: none (with the parameters), disk:DIR (a scratch file per "
             "rank under DIR, streamed through in chunks), host (with the fp32 master in pinned "
             "host memory, updated there by the CPU while the GPU goes on; on cpu it saves "
             "nothing)");
  add_parsed(app, "--memory-limit", zero.memory_limit, parse_byte_count,
             "the most memory each rank reserves on its device, e.g. 80GiB (default: what the "
             "device has); on cpu it makes a rank a GPU of that size, outside which "
             "--offload-optimizer host keeps the state (Note [Memory limit])");
  app.add_flag("--offload-grads", zero.grad_reduce.offload,
               "keep fp32 gradients in host memory between micro-batches");
  app.add_flag("--tf32", o.tf32,
               "fp32 GEMMs on CUDA round their inputs to TF32 on the tensor cores (fp32 "
               "accumulation, about 1e-3 "
               "relative error; ZRT_TF32=1 does the same; no effect on cpu or bf16)");
  app.add_option("--ranks", o.ranks, "run N ranks as threads of this process (local backend)")
      ->check(kNonNegative);
  app.add_option("--threads", o.threads,
                 "CPU kernel threads per rank (0: the process's cores divided among its ranks)")
      ->check(tools::whole_number(0, kernels::kMaxCpuThreads));
}

// Files written, checkpoints and the memory plan.
void add_output_flags(CLI::App& app, TrainOptions& o) {
  app.add_option("--init-from", o.trainer.init_from, "load all parameters from a safetensors file");
  app.add_option("--save", o.save, "write all parameters (fp32) to a safetensors file at the end");
  app.add_option("--metrics", o.metrics, "write one JSON object per step to this file");
  app.add_option("--trace", o.trace,
                 "write a Chrome/Perfetto trace of every step (T.json; T.rank-R.json per rank with "
                 "several ranks)");
  app.add_option("--log-every", o.log_every, "print a line every N steps")->check(kPositive);
  app.add_option("--checkpoint-dir", o.checkpoint_dir,
                 "save checkpoints under DIR/step-NNNNNN (at the end, every --checkpoint-every "
                 "steps, on SIGTERM/SIGINT/SIGHUP)");
  app.add_option(
         "--checkpoint-every", o.checkpoint_every,
         "save a checkpoint every N steps (0: only at the end and on SIGTERM/SIGINT/SIGHUP)")
      ->check(kNonNegative);
  app.add_option("--keep-last", o.keep_last, "keep only the newest K checkpoints (0: all)")
      ->check(kNonNegative);
  app.add_flag(
      "--checkpoint-async", o.trainer.checkpoint_async,
      "save checkpoints in the background: training pauses only to copy the state into host "
      "staging "
      "buffers (one checkpoint's worth of memory per rank), then goes on while a thread writes it");
  app.add_option(
         "--check-consistency", o.trainer.check_consistency_every,
         "every N steps, prove that replicas and zero3 shards agree, before the update (0: never)")
      ->check(kNonNegative);
  add_choice(app, "--on-inconsistency", o.trainer.consistency_warn_only,
             {{"stop", false}, {"warn", true}}, "what a failed consistency check does");
  app.add_flag("--plan", o.plan,
               "print each rank's expected memory peak by category, from dry steps that allocate "
               "and compute "
               "nothing, and exit");
  app.add_option("--fit", o.fit,
                 "with --plan: list the strategies and settings whose peak fits in BYTES "
                 "(e.g. 24GiB, 80GB)");
  app.add_option("--fit-host", o.fit_host,
                 "with --plan --fit: list only the settings whose every rank holds at most BYTES "
                 "of host memory outside the device's (offloaded optimizer state; e.g. the "
                 "machine's memory over its ranks)");
}

// The defaults that depend on other flags, resolved once, here.
void resolve_dependent_defaults(const CLI::App& app, TrainOptions& o) {
  model_zoo::TrainerConfig& t = o.trainer;
  if (!given(app, "--min-lr")) t.schedule.min_lr = t.schedule.max_lr / 10;
  if (!given(app, "--warmup")) t.schedule.warmup_steps = std::min(t.schedule.warmup_steps, t.steps);
  raise_block_size_to_seq_len(t);
  // A CPU rank emulating a GPU of --memory-limit holds what its plan says
  // only with --cpu-streams none (Note [Memory limit]), so a limit on the
  // cpu makes none the default; --cpu-streams or ZRT_CPU_STREAMS still win
  // (the plan's own check before training refuses what cannot fit).
  optim::ZeroModuleOptions& zero = t.engine.zero;
  if (o.device == "cpu" && zero.memory_limit > 0 && !zero.cpu_streams && !optim::env_cpu_streams())
    zero.cpu_streams = optim::CpuStreams::none;
}

// The model's rules (model_zoo::validate_model_config) in the flags' names:
// "model config: n_embd 1 is not divisible by n_head 2" becomes "--n-embd 1
// is not divisible by --n-head 2".
void check_model_flags(const model_zoo::ModelConfig& m) {
  try {
    model_zoo::validate_model_config(m);
  } catch (const InvalidArgument& e) {
    std::string text = e.what();
    if (text.starts_with("model config: ")) text.erase(0, 14);
    // (word, flag, at the start only) in the message's words.
    static const std::tuple<const char*, const char*, bool> kFlags[] = {
        {"n_layer", "--n-layer", false},
        {"n_head", "--n-head", false},
        {"n_embd", "--n-embd", false},
        {"vocab_size", "--vocab-size", false},
        {"block_size", "--block-size", false},
        {"vocab_align", "--vocab-align", false},
        {"hidden width", "--hidden width", false},
        {"activation", "--activation", true},
        {"a head unit", "--head-unit: a head unit", true},
        {"unknown gpt preset", "--preset: unknown gpt preset", true},
        {"unknown mlp preset", "--preset: unknown mlp preset", true}};
    for (const auto& [word, flag, at_start] : kFlags)
      text = rename_word(text, word, flag, at_start);
    throw InvalidArgument(text, e.file(), e.line(), e.expr());  // ZRT_DEBUG: the model's check
  }
}

// The flags' combined rules, after parsing (InvalidArgument naming the flag).
void check_parsed_options(const CLI::App& app, TrainOptions& o) {
  const model_zoo::TrainerConfig& t = o.trainer;
  // An empty value (an unset shell variable) would silently mean "not given".
  for (const char* flag :
       {"--data", "--init-from", "--save", "--metrics", "--trace", "--checkpoint-dir"})
    ZRT_CHECK_ARG(!given(app, flag) || !app.get_option(flag)->as<std::string>().empty(), flag,
                  ": the path is empty; leave the flag out if it is not wanted");
  // AdamW's rules in the flags' names: "AdamW max_grad_norm must be ..."
  // becomes "--clip must be ...".
  try {
    optim::check_adamw_options(o.trainer.engine.zero.adamw);
  } catch (const InvalidArgument& e) {
    static const std::pair<const char*, const char*> kFlags[] = {
        {"AdamW beta1", "--beta1"},
        {"AdamW beta2", "--beta2"},
        {"AdamW eps", "--eps"},
        {"AdamW weight_decay", "--weight-decay"},
        {"AdamW max_grad_norm", "--clip"},
        {"AdamW max_consecutive_skips", "--max-skipped-steps"}};
    std::string text = e.what();
    for (const auto& [word, flag] : kFlags) text = rename_word(text, word, flag, true);
    throw InvalidArgument(text, e.file(), e.line(), e.expr());
  }
  check_flag_combinations(app, o);
  ZRT_CHECK_ARG(o.fit.empty() || o.plan, "--fit ", o.fit, " is read by --plan only");
  if (o.plan) {
    const int world = o.ranks > 0 ? o.ranks : detect_launch().size;
    ZRT_CHECK_ARG(world <= model_zoo::kMaxPlannedRanks, "--plan plans at most ",
                  model_zoo::kMaxPlannedRanks, " ranks (each a thread of this process), not ",
                  world);
  }
  ZRT_CHECK_ARG(!given(app, "--on-inconsistency") || o.trainer.check_consistency_every > 0,
                "--on-inconsistency is read by --check-consistency N only");
  ZRT_CHECK_ARG(o.fit_host.empty() || !o.fit.empty(), "--fit-host ", o.fit_host,
                " is read by --plan --fit only");
  // A bad budget fails now, with the flag.
  for (const auto& [flag, budget] :
       {std::pair{"--fit", &o.fit}, std::pair{"--fit-host", &o.fit_host}})
    if (!budget->empty()) {
      try {
        parse_byte_count(*budget);
      } catch (const InvalidArgument& e) {
        ZRT_THROW(InvalidArgument, flag, ": ", e.what());
      }
    }
  if (!o.data.empty()) model_zoo::check_data_file(o.data);
  // A FIFO, a device or a directory fails now, by its flag (Note [One rule
  // for every file zrt reads]).
  if (!o.trainer.init_from.empty() && !resumes_a_checkpoint(o))
    InputFile(o.trainer.init_from, std::numeric_limits<std::uint64_t>::max(), InputKind::argument,
              "--init-from");
  check_outputs(o);
  if (!o.checkpoint_dir.empty() && !o.plan) {  // --plan writes no checkpoint
    // --resume alone reads DIR's latest, and names what is wrong with it.
    check_checkpoint_dir(o.checkpoint_dir, o.resume && o.resume_from.empty());
    check_continues_checkpoint_dir(o.checkpoint_dir, o.resume, o.resume_from);
  }
  ZRT_CHECK_ARG(o.trainer.init_from.empty() || o.resume_from.empty(), "--init-from ",
                o.trainer.init_from, " would not be read: --resume ", o.resume_from,
                " loads the weights");
  ZRT_CHECK_ARG(!given(app, "--warmup") || t.schedule.warmup_steps <= t.steps, "--warmup ",
                t.schedule.warmup_steps, " is longer than --steps ", t.steps,
                " (the default warm-up is cut to --steps; an explicit one is not)");
  ZRT_CHECK_ARG(t.schedule.min_lr <= t.schedule.max_lr, "--min-lr ", t.schedule.min_lr,
                " is above --lr ", t.schedule.max_lr,
                ": the cosine decays from --lr down to --min-lr");
  ZRT_CHECK_ARG(t.model.block_size.value_or(t.seq_len) >= t.seq_len, "--block-size ",
                t.model.block_size.value_or(0), " is shorter than --seq-len ", t.seq_len,
                ": every position of a sequence needs an embedding");
  ZRT_CHECK_ARG(o.transport != "nccl" || o.device == "cuda",
                "--transport nccl moves CUDA tensors only: it needs "
                "--device cuda");
  if (o.checkpoint_dir.empty()) {
    ZRT_CHECK_ARG(o.checkpoint_every == 0, "--checkpoint-every needs --checkpoint-dir");
    ZRT_CHECK_ARG(o.keep_last == 0, "--keep-last needs --checkpoint-dir");
    ZRT_CHECK_ARG(!o.trainer.checkpoint_async, "--checkpoint-async needs --checkpoint-dir");
    ZRT_CHECK_ARG(!o.resume || !o.resume_from.empty(),
                  "--resume without a path needs --checkpoint-dir (where `latest` names the step)");
  }
}

}  // namespace

bool parse_train_options(int argc, char** argv, TrainOptions& o) {
  CLI::App app{
      "zrt-train: train a model-zoo model under ZeRO-3 (one process, mpirun -np N, or --ranks N)"};
  app.option_defaults()->always_capture_default();
  add_model_flags(app, o);
  add_schedule_flags(app, o);
  add_optimizer_flags(app, o);
  add_precision_flags(app, o);
  add_placement_flags(app, o);
  add_output_flags(app, o);
  auto* resume =
      app.add_option("--resume", o.resume_from,
                     "continue from a checkpoint: a step directory, or (no value) `latest` under "
                     "--checkpoint-dir, starting fresh if there is none yet")
          ->expected(0, 1);
  tools::check_command_line(app, argc, argv);
  // --hidden is checked whole: CLI11 splits it first, dropping an empty
  // width ("64,,64" trained 64,64), and a lone "," took the next flag.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const std::string value = arg.starts_with("--hidden=")        ? std::string(arg.substr(9))
                              : arg == "--hidden" && i + 1 < argc ? argv[i + 1]
                                                                  : std::string("64");
    ZRT_CHECK_ARG(is_width_list(value), "--hidden: '", value,
                  "' is not whole numbers separated by commas, e.g. 64,64");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    ZRT_THROW(InvalidArgument, tools::parse_error_text(app, e),
              " (zrt-train --help lists the flags)");
  }
  o.resume = resume->count() > 0;
  // `--resume ""` (an unset shell variable) would read as the bare flag: `latest`.
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    ZRT_CHECK_ARG(arg != "--resume=" && (arg != "--resume" || i + 1 == argc || *argv[i + 1]),
                  "--resume: the path is empty; give --resume no value to continue from "
                  "`latest` under --checkpoint-dir");
  }
  // A checkpoint directory's `latest` file means that directory
  // (docs/checkpoints.md): every check below then sees the directory.
  if (!o.resume_from.empty()) o.resume_from = optim::checkpoint_root_of(o.resume_from);
  o.flag_values = parsed_flag_values(app);
  o.as_given = {o.trainer.model.block_size.value_or(0), o.trainer.schedule.warmup_steps};
  check_model_flags(o.trainer.model);
  resolve_dependent_defaults(app, o);
  check_parsed_options(app, o);
  return true;
}

}  // namespace zrt::train
