// zrt-bench train [--device cpu|cuda] [--model gpt|mlp] [--preset P] [--n-layer --n-head --n-embd --vocab-size]
//                 [--batch-size B] [--seq-len T] [--dtype D] [--reduce-dtype D] [--strategy S]
//                 [--ranks R]
//                 [--prefetch LIST] [--activation-checkpointing LIST]
//                 [--cpu-streams none|comm|all] [--link-gbps LIST] [--link-us US]
//                 [--gather-after-update on,off] [--offload-optimizer none|host|disk:DIR]
//                 [--rounds R]
//                 [--threads N] [--warmup K] [--steps N] [--init-from W] [--peak-gflops G | --peak-tflops T]
//                 [--save-init W] [--save-data D] [--json]
//
// Times whole training steps of a model-zoo model, built and driven as
// zrt-train builds and drives it (tools/train/train_setup.h), on the embedded
// dataset in the fixed data order: the median, fastest and slowest of N steps
// after K warm-up steps, tokens/s, model GFLOP/s and their fraction of the
// fp32 peak measured in the same process (Note [Measured fp32 peak]), and
// memory. --save-init and --save-data write the initial weights and the
// tokens, so another framework (tools/bench/torch_gpt.py) trains the same
// model on the same data.
//
// --device cuda trains on the GPU (rank r on cuda:r mod the device count, as
// zrt-train): each timed step is bracketed by device synchronisations, so it
// counts the kernels it queued, and the fraction of peak is taken against
// the dense tensor-core (bf16/fp16) or plain fp32 figure of the device's
// datasheet (Note [CUDA peak]) unless --peak-gflops/--peak-tflops gives one.
// A build without CUDA refuses --device cuda (exit 2, a bad command line).
//
// --prefetch 0,1,2 times each prefetch depth side by side, alternating over
// --rounds rounds (a fresh model each time, so each starts alike), with each
// depth's step time against the first's, and the communication time per step
// and the fraction of it that ran while the rank computed (Tracer::overlap
// of the timed steps' trace: collectives on the communication track inside
// the compute track's "compute" events, Note [Trace timeline]).
// --activation-checkpointing none,blocks,every:2 does the same for the
// checkpointing modes (Note [Activation checkpointing]), each with its step's
// allocator peak; with both lists, every depth with every mode.
//
// --link-gbps none,100,400 does the same for link models (Note [Link
// model]): each collective of the host ranks held for its bytes on a link of
// that many Gb/s, plus --link-us microseconds (default 0) each; "none" is no
// model. Without it the runs keep ZRT_LINK_GBPS and ZRT_LINK_US. Every run
// says how many bytes each rank put on the link per step, by kind of
// collective (Note [Bytes on the link]: a ring algorithm's, counted as the
// collectives are issued).
//
// --gather-after-update on,off does the same with the next step's first
// gathers issued as each unit is updated (on, the default) or at the next
// step's start (Note [Gathers after the update] in optim/zero_module.cpp).
// --offload-optimizer places AdamW's state as zrt-train's flag does (Note
// [Optimizer state on disk]), for every variant.
//
// Every run also says where a step's time goes: forward, backward,
// optimizer and communication per step and rank, from events recorded on
// the streams that run them (CUDA events on the device, the host clock on
// the CPU) and read after each step's synchronisation, so the step itself
// waits no more (Note [Step phase times]).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#ifdef ZRT_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "tools/bench/bench_util.h"
#include "tools/bench/fp32_peak.h"
#include "tools/bench/suites.h"
#include "tools/train/train_setup.h"
#include "zrt/kernels/cpu_parallel.h"
#include "zrt/optim/checkpoint/durable_files.h"
#include "zrt/optim/checkpoint/full_param_file.h"
#include "zrt/runtime/comm/comm_traffic.h"
#include "zrt/runtime/comm/launched_world.h"
#include "zrt/runtime/comm/link_model.h"
#include "zrt/runtime/io/output_path.h"
#include "zrt/runtime/io/path_overlap.h"
#include "zrt/runtime/io/safetensors.h"
#include "zrt/runtime/phase_timer.h"

namespace zrt::bench {
namespace {

// The value `name` gives `flag` in its table (zrt-train's names); else
// InvalidArgument listing them.
template <typename T>
T flag_value(const std::vector<std::pair<std::string, T>>& table, const char* flag,
             const std::string& name) {
  std::string names;
  for (const auto& [n, value] : table) {
    if (n == name) return value;
    names += (names.empty() ? "" : ", ") + n;
  }
  ZRT_THROW(InvalidArgument, flag, " is one of ", names, ", not ", name);
}

struct Options {
  train::TrainOptions train;  // model, batch, dtype, strategy, ranks, --init-from, --cpu-streams
  // As given; parsed into train.engine.zero.
  std::string dtype = "fp32", reduce_dtype = "fp32", gather_dtype = "compute", strategy = "full",
              cpu_streams;
  std::string offload_optimizer = "none";
  std::vector<int> prefetch;               // the depths to time, in this order
  std::vector<std::string> checkpointing;  // the activation checkpointing modes, in this order
  std::vector<LinkModel> links;            // the link models, in this order
  std::vector<bool> early_gathers;  // EngineConfig::gather_after_update values, in this order
  int warmup = 2, steps = 5, threads = 0, rounds = 1;
  double peak_gflops = 0;  // > 0: use instead of measuring (cpu) or the datasheet table (cuda)
  double peak_tflops = 0;  // --peak-tflops, the same in TFLOP/s
  std::string save_init, save_data;
  bool json = false;
};

// Flags as zrt-train spells them; --warmup here counts untimed steps (the
// learning-rate warm-up keeps zrt-train's default).
// "a,b,,c" -> {"a", "b", "", "c"}: empty items stay, for the parsers to refuse.
std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// "none,100,400" -> link models of no, 100 and 400 Gb/s, each with
// `latency_us` (none: without); InvalidArgument naming the list otherwise.
std::vector<LinkModel> parse_link_list(const std::string& list, double latency_us) {
  std::vector<LinkModel> out;
  for (const std::string& item : split_commas(list)) {
    if (item == "none") {
      out.push_back({});
      continue;
    }
    char* end = nullptr;
    const double gbps = std::strtod(item.c_str(), &end);
    ZRT_CHECK_ARG(!item.empty() && *end == '\0' && gbps > 0,
                  "--link-gbps takes 'none' or bandwidths in Gb/s above 0 separated by "
                  "commas, not '",
                  list, "'");
    out.push_back({.gbps = gbps, .latency_us = latency_us});
    check_link_model(out.back(), "--link-gbps", "--link-us");
  }
  return out;
}

// "0,1,2" -> {0, 1, 2}; InvalidArgument naming the list otherwise.
std::vector<int> parse_prefetch_list(const std::string& list) {
  std::vector<int> out;
  for (const std::string& item : split_commas(list)) {
    ZRT_CHECK_ARG(item.size() == 1 && item[0] >= '0' && item[0] <= '2',
                  "--prefetch takes depths 0, 1 or 2 separated by commas, not '", list, "'");
    out.push_back(item[0] - '0');
  }
  return out;
}

// "none,every:2" -> {"none", "every:2"}, each a valid mode; InvalidArgument naming the list otherwise.
std::vector<std::string> parse_checkpointing_list(const std::string& list) {
  std::vector<std::string> out;
  for (const std::string& item : split_commas(list)) {
    try {
      out.push_back(model_zoo::parse_activation_checkpointing(item).str());
    } catch (const InvalidArgument& e) {
      ZRT_THROW(InvalidArgument,
                "--activation-checkpointing takes modes separated by commas, not '", list,
                "': ", e.what());
    }
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  train::TrainOptions& t = o.train;
  model_zoo::TrainerConfig& c = t.trainer;
  c.batch_size = 8;
  std::int64_t n_layer = 0, n_head = 0, n_embd = 0, vocab_size = 0;  // 0: the preset's
  std::string prefetch = std::to_string(c.engine.prefetch);
  std::string checkpointing = c.engine.checkpointing.str();
  std::string links, early_gathers = "on";
  double link_us = 0;
  OptionParser parser(
      "train",
      "usage: zrt-bench train [--device cpu|cuda] [--model gpt|mlp] [--preset P] [--n-layer L] "
      "[--n-head H]\n"
      "         [--n-embd C]"
      "         [--vocab-size V] [--batch-size B] [--seq-len T] [--dtype fp32|bf16|fp16]\n"
      "         [--reduce-dtype fp32|bf16|fp16|int8|int4] [--gather-dtype compute|int8]\n"
      "         [--strategy S] [--ranks R] [--prefetch LIST] [--activation-checkpointing LIST]\n"
      "         [--cpu-streams none|comm|all] [--link-gbps LIST] [--link-us US]\n"
      "         [--gather-after-update on,off] [--offload-optimizer none|host|disk:DIR]\n"
      "         [--rounds R] [--threads N] [--warmup K] [--steps N]\n"
      "         [--init-from W.safetensors] [--peak-gflops G | --peak-tflops T] [--save-init "
      "W.safetensors]\n"
      "         [--save-data D.safetensors] [--json]");
  parser.value("--device", t.device)
      .value("--model", c.model.kind)
      .value("--preset", c.model.preset)
      .value("--n-layer", n_layer)
      .value("--n-head", n_head)
      .value("--n-embd", n_embd)
      .value("--vocab-size", vocab_size)
      .value("--batch-size", c.batch_size)
      .value("--seq-len", c.seq_len)
      .value("--dtype", o.dtype)
      .value("--reduce-dtype", o.reduce_dtype)
      .value("--gather-dtype", o.gather_dtype)
      .value("--strategy", o.strategy)
      .value("--ranks", t.ranks)
      .value("--prefetch", prefetch)
      .value("--activation-checkpointing", checkpointing)
      .value("--cpu-streams", o.cpu_streams)
      .value("--link-gbps", links)
      .value("--link-us", link_us)
      .value("--gather-after-update", early_gathers)
      .value("--offload-optimizer", o.offload_optimizer)
      .value("--rounds", o.rounds)
      .value("--init-from", c.init_from)
      .value("--threads", o.threads)
      .value("--warmup", o.warmup)
      .value("--steps", o.steps)
      .value("--peak-gflops", o.peak_gflops)
      .value("--peak-tflops", o.peak_tflops)
      .value("--save-init", o.save_init)
      .value("--save-data", o.save_data)
      .flag("--json", o.json);
  parser.parse(argc, argv);
  ZRT_CHECK_ARG(t.device == "cpu" || t.device == "cuda", "--device is cpu or cuda, not '", t.device,
                "'");
#ifndef ZRT_WITH_CUDA
  if (t.device == "cuda")
    ZRT_THROW(
        InvalidArgument,
        "--device cuda: this build of zrt has no CUDA support (configure with -DZRT_CUDA=ON)");
#endif
  ZRT_CHECK_ARG(t.device == "cpu" || cuda_device_count() > 0,
                "--device cuda, but no CUDA device is usable here");
  ZRT_CHECK_ARG(c.model.kind == "gpt" || c.model.kind == "mlp", "--model is gpt or mlp, not ",
                c.model.kind);
  ZRT_CHECK_ARG(
      c.model.kind == "gpt" || !(parser.given("--n-layer") || parser.given("--n-head") ||
                                 parser.given("--n-embd") || parser.given("--vocab-size")),
      "--n-layer, --n-head, --n-embd and --vocab-size are gpt flags");
  ZRT_CHECK_ARG(c.model.kind == "gpt" || !parser.given("--seq-len"),
                "--seq-len is a gpt flag (an mlp's rows have no sequence)");
  for (auto [flag, field, v] : {std::tuple{"--n-layer", &c.model.n_layer, n_layer},
                                {"--n-head", &c.model.n_head, n_head},
                                {"--n-embd", &c.model.n_embd, n_embd},
                                {"--vocab-size", &c.model.vocab_size, vocab_size}}) {
    ZRT_CHECK_ARG(!parser.given(flag) || v > 0, flag, " must be positive (got ", v, ")");
    if (v > 0) *field = v;
  }
  ZRT_CHECK_ARG(c.batch_size > 0 && c.seq_len > 0 && o.steps > 0 && o.rounds > 0,
                "--batch-size, --seq-len, --steps and --rounds must be positive");
  o.prefetch = parse_prefetch_list(prefetch);
  o.checkpointing = parse_checkpointing_list(checkpointing);
  check_link_model({.latency_us = link_us}, "--link-gbps", "--link-us");
  for (const std::string& item : split_commas(early_gathers)) {
    ZRT_CHECK_ARG(item == "on" || item == "off",
                  "--gather-after-update takes on and off separated by commas, not '",
                  early_gathers, "'");
    o.early_gathers.push_back(item == "on");
  }
  o.links = links.empty() ? std::vector<LinkModel>{link_model_from_env()}
                          : parse_link_list(links, link_us);
  // InvalidArgument naming the value or the directory.
  c.engine.zero.offload_optimizer = optim::parse_optimizer_offload(o.offload_optimizer);
  train::check_offload_dir(c.engine.zero.offload_optimizer);
  if (!o.cpu_streams.empty()) try {
      c.engine.zero.cpu_streams = optim::parse_cpu_streams(o.cpu_streams);
    } catch (const InvalidArgument& e) {  // "CPU streams 'x' is not one of ..."
      std::string text = e.what();
      if (text.starts_with("CPU streams ")) text.erase(0, std::strlen("CPU streams "));
      throw InvalidArgument("--cpu-streams " + text, e.file(), e.line(), e.expr());
    }
  ZRT_CHECK_ARG(
      o.warmup >= 0 && o.threads >= 0 && t.ranks >= 0 && o.peak_gflops >= 0 && o.peak_tflops >= 0,
      "--warmup, --threads, --ranks, --peak-gflops and --peak-tflops must not be negative");
  ZRT_CHECK_ARG(o.threads <= kernels::kMaxCpuThreads, "--threads ", o.threads, " is more than ",
                kernels::kMaxCpuThreads);
  ZRT_CHECK_ARG(o.peak_gflops == 0 || o.peak_tflops == 0,
                "give --peak-gflops or --peak-tflops, not both");
  if (o.peak_tflops > 0) o.peak_gflops = o.peak_tflops * 1e3;
  const auto dtype = std::find_if(std::begin(train::kDTypeFlags), std::end(train::kDTypeFlags),
                                  [&](const train::DTypeFlag& f) { return f.name == o.dtype; });
  ZRT_CHECK_ARG(dtype != std::end(train::kDTypeFlags), "--dtype is fp32, bf16 or fp16, not ",
                o.dtype);
  c.engine.zero.dtype = dtype->dtype;
  c.engine.zero.grad_reduce.dtype =
      flag_value(train::reduce_dtype_flags(), "--reduce-dtype", o.reduce_dtype);
  c.engine.zero.gather.dtype =
      flag_value(train::gather_dtype_flags(), "--gather-dtype", o.gather_dtype);
  const auto strategy = optim::parse_strategy(o.strategy);
  ZRT_CHECK_ARG(strategy.has_value(), "unknown --strategy ", o.strategy,
                " (full, grad-op, no-shard, hybrid, layer-zero)");
  c.engine.zero.strategy = *strategy;
  ZRT_CHECK_ARG(t.ranks == 0 || detect_launch().launcher == Launcher::single,
                "--ranks starts local ranks, but this process was started by a launcher: "
                "drop --ranks");
  ZRT_CHECK_ARG(t.ranks <= train::kMaxLocalRanks, "--ranks ", t.ranks, " is more than ",
                train::kMaxLocalRanks);
  // Note [No output onto an input]: checked before anything is written.
  const NamedPath outputs[] = {{"--save-init", o.save_init}, {"--save-data", o.save_data}};
  const NamedPath inputs[] = {{"the --init-from file", c.init_from}};
  for (const NamedPath& out : outputs) {
    if (out.path.empty()) continue;
    check_output_file(out.path, out.what);
    check_output_clear_of_inputs(out, inputs);
    optim::check_output_outside_checkpoint_steps(out);
  }
  ZRT_CHECK_ARG(o.save_init.empty() || o.save_data.empty() ||
                    resolved_path(o.save_init) != resolved_path(o.save_data),
                "--save-init and --save-data name the same file ", o.save_init,
                ": give each output a file of its own");
  c.steps = o.warmup + o.steps;
  c.schedule.warmup_steps = std::min(c.schedule.warmup_steps, c.steps);  // zrt-train's default
  train::raise_block_size_to_seq_len(c);
  return o;
}

// Note [Model FLOPs]
// ~~~~~~~~~~~~~~~~~~
// The FLOPs of a training step are the model's, not zrt's: PaLM's estimate
// (Chowdhery et al. 2022, appendix B), as nanoGPT's estimate_mfu spells it,
//   per token: 6·N + 12·L·C·T   (gpt; mlp: 6·N)
// with N the parameters less the position embedding (wpe only adds; the token
// embedding counts, being the LM head's matrix too), L layers, C the width and
// T the sequence length: 2 FLOPs per weight and token forward, 4 backward,
// and the two attention matmuls (QKᵀ and AV, 2·T·C each per layer and token,
// ×3 for forward and backward, causal masking not discounted). LayerNorm,
// GELU, softmax and the optimizer are left out. Recomputation, padding and
// anything else zrt does beyond the model never count, so the figure compares
// implementations of the same model on the same footing.
struct ParamCounts {
  std::int64_t all = 0, flop = 0;  // every parameter; those that N counts
};

ParamCounts count_params(const model_zoo::TrainingEngine& engine) {
  ParamCounts n;
  for (const auto& p : model_zoo::all_param_defs(engine.model().units())) {
    std::int64_t numel = 1;
    for (std::int64_t d : p.shape) numel *= d;
    n.all += numel;
    if (p.fqn() != "wpe.weight") n.flop += numel;
  }
  return n;
}

double step_flops(std::int64_t flop_params, const model_zoo::TrainerConfig& c,
                  std::int64_t tokens) {
  double attention = 0;
  if (c.model.kind == "gpt") {
    const model_zoo::GptDims d = model_zoo::resolve_gpt_dims(c.model);
    attention = 12.0 * static_cast<double>(d.n_layer * d.n_embd * c.seq_len);
  }
  return (6.0 * static_cast<double>(flop_params) + attention) * static_cast<double>(tokens);
}

// Every rank's values, rank by rank.
std::vector<std::vector<double>> gather(Communicator& world, const std::vector<double>& mine) {
  std::vector<std::vector<double>> out;
  for (const auto& bytes : world.all_gather_bytes(std::as_bytes(std::span(mine)))) {
    std::vector<double> v(bytes.size() / sizeof(double));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(double));
    out.push_back(std::move(v));
  }
  return out;
}

// The peak of every rank's kernel threads running together: the best of five
// runs of the FMA loop, all FLOPs of all ranks over the longest rank's time.
double measured_peak_gflops(Communicator& world, int threads) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    world.barrier();
    const FmaLoopRun r = run_fma_loop(threads, 0.1);
    double flops = 0, seconds = 0;
    for (const auto& v : gather(world, {r.flops, r.seconds}))
      flops += v[0], seconds = std::max(seconds, v[1]);
    best = std::max(best, flops / seconds / 1e9);
  }
  return best;
}

// Note [CUDA peak]
// ~~~~~~~~~~~~~~~~~
// On --device cuda the fraction of peak is against the device's datasheet
// figure for the compute dtype, dense (NVIDIA's tensor-core figures are
// quoted "with sparsity", twice the dense ones): the H100 datasheet
// (nvidia.com/en-us/data-center/h100, SXM5 / PCIe / NVL) and the H200 one
// (nvidia.com/en-us/data-center/h200, SXM / NVL), in TFLOP/s:
//                         bf16/fp16 tensor   tf32 tensor   fp32 (no tensor core)
//   H100 SXM5, H200 SXM, GH200      989            495             67
//   H100 NVL, H200 NVL              835            418             60
//   H100 PCIe                       756            378             51
// fp32 runs take the plain fp32 column: by default zrt's fp32 GEMMs compute
// in CUBLAS_COMPUTE_32F (kernels/nn/gemm.cu), which uses no TF32, and
// PyTorch's matmuls do not either, so the TF32 figures are not the ceiling
// of either. With ZRT_TF32=1 (Note [TF32 GEMMs]) the GEMMs run on the TF32
// tensor cores, but the fraction is still against the fp32 figure (the tf32
// column is quoted here, not read; --peak-tflops can give it). The
// device is matched by cudaGetDeviceProperties' name; another GPU has no
// figure here (peak_source "unknown", no fraction) unless --peak-gflops or
// --peak-tflops gives one.
struct Peak {
  double gflops = 0;   // 0: unknown
  std::string source;  // "given", the measured ISA, or the datasheet row
};

std::string cuda_device_name([[maybe_unused]] int index) {
#ifdef ZRT_WITH_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) == cudaSuccess) return prop.name;
  cudaGetLastError();
#endif
  return "unknown";
}

Peak cuda_datasheet_peak(const std::string& name, const std::string& dtype) {
  struct Row {
    const char* match;  // a substring of the device name
    const char* label;
    double bf16, fp32;  // dense TFLOP/s
  };
  static constexpr Row rows[] = {
      {"H100 NVL", "H100 NVL", 835, 60},   {"H200 NVL", "H200 NVL", 835, 60},
      {"H100 PCIe", "H100 PCIe", 756, 51}, {"GH200", "GH200", 989, 67},
      {"H100", "H100 SXM5", 989, 67},      {"H200", "H200 SXM", 989, 67},
  };
  const bool half = dtype == "bf16" || dtype == "fp16";
  for (const Row& r : rows)
    if (name.find(r.match) != std::string::npos)
      return {(half ? r.bf16 : r.fp32) * 1e3,
              std::string("datasheet, ") + r.label + (half ? " dense bf16/fp16 tensor" : " fp32")};
  return {0, "unknown"};
}

// Waits for every kernel this thread's current device has queued (a no-op on cpu).
void device_synchronize([[maybe_unused]] const std::string& device) {
#ifdef ZRT_WITH_CUDA
  if (device == "cuda") {
    const cudaError_t st = cudaDeviceSynchronize();
    ZRT_CHECK_AS(CudaError, st == cudaSuccess, "cudaDeviceSynchronize: ", cudaGetErrorString(st));
  }
#endif
}

// This process's peak resident memory: VmHWM (Linux /proc; 0 where unknown).
// Unlike getrusage's ru_maxrss it starts afresh at exec, so a parent's peak
// (a Python driver with PyTorch loaded) does not count.
double peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::strtod(line.c_str() + 6, nullptr) * 1024.0;  // kB
  return 0;
}

// One prefetch depth's and checkpointing mode's figures (rank 0 holds them;
// the others' go into them).
struct Result {
  int prefetch = 0;
  std::string checkpointing;
  LinkModel link;
  bool gather_after_update = true;
  std::vector<double> step_s;  // per timed step over the rounds, the slowest rank's time
  double loss_first = 0, loss_last = 0, flops = 0, tokens = 0;
  double comm_us = 0, overlapped_us = 0;  // summed over ranks and timed steps
  PhaseTimes phases;  // summed over ranks and timed steps (Note [Step phase times])
  double alloc_peak = 0, rss_peak = 0;  // the largest over ranks
  double step_peak =
      0;  // the largest allocator peak of one timed step (allocated bytes) over ranks
  TrafficCounts traffic;     // bytes on the link, summed over ranks and timed steps
  double max_rank_sent = 0;  // the most bytes one rank sent per timed step (over a round)
};

struct Run {
  std::vector<Result>
      results;  // one per --prefetch depth and --activation-checkpointing mode, in order
  std::int64_t params = 0;
  int threads = 0;  // rank 0's kernel threads
  Peak peak;
  std::string device_name;  // cuda: rank 0's GPU
  model_zoo::GptDims gpt;   // gpt only
};

// Trains a fresh model at prefetch depth `result.prefetch`, checkpointing
// `result.checkpointing` and link model `result.link` for the warm-up and
// timed steps and adds this round's figures to `result` (on rank 0).
void time_variant(const CommPtr& world, int local_rank, const Options& o, Result& result,
                  Run& run) {
  train::TrainOptions t = o.train;
  t.trainer.engine.prefetch = result.prefetch;
  t.trainer.engine.gather_after_update = result.gather_after_update;
  t.trainer.engine.checkpointing = model_zoo::parse_activation_checkpointing(result.checkpointing);
  model_zoo::TrainerConfig config = train::trainer_config(t, local_rank);
  const auto tracer = std::make_shared<Tracer>(world->rank());
  config.engine.zero.tracer = tracer;
  const auto phase_timer = std::make_shared<PhaseTimer>(config.engine.zero.device);
  config.engine.phase_timer = phase_timer;
  world->set_link_model(result.link);  // the groups the trainer splits inherit it
  model_zoo::Trainer trainer = train::make_trainer(world, t, config);
  TrafficCounts traffic;  // over the timed steps
  // timed step seconds, comm busy and overlapped us, allocator peaks, process peak RSS, phase ms
  std::vector<double> mine;
  double since_us = 0, step_peak = 0, reserved_peak = 0;
  PhaseTimes phases;
  const bool cuda = t.device == "cuda";
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup) since_us = tracer->now_us();
    // On cuda the step's own clock stops when its last kernel is queued, not
    // run: time it between device synchronisations instead.
    device_synchronize(t.device);
    const auto t0 = std::chrono::steady_clock::now();
    const model_zoo::StepReport r = trainer.step();
    device_synchronize(t.device);
    const double seconds =
        cuda ? std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
             : r.seconds;
    // After the step's wait (and on cuda the synchronisation): nothing left to wait for.
    const PhaseTimes step_phases = phase_timer->read();
    if (s == 0) result.loss_first = r.stats.loss;
    result.loss_last = r.stats.loss;
    result.tokens = static_cast<double>(r.stats.tokens);
    reserved_peak = std::max(reserved_peak,
                             static_cast<double>(r.memory.peak_reserved));  // each step's own peak
    if (s >= o.warmup) {
      mine.push_back(seconds);
      step_peak = std::max(step_peak, static_cast<double>(r.memory.peak_allocated));
      phases += step_phases;
      traffic += r.traffic;
    }
  }
  const Tracer::Overlap overlap = tracer->overlap("comm", "compute", since_us);
  mine.push_back(overlap.busy_us);
  mine.push_back(overlap.overlapped_us);
  mine.push_back(reserved_peak);
  mine.push_back(peak_rss_bytes());
  mine.push_back(step_peak);
  for (double ms : {phases.forward_ms, phases.backward_ms, phases.optimizer_ms, phases.comm_ms})
    mine.push_back(ms);
  for (const KindTraffic& k : traffic.kinds) {
    mine.push_back(static_cast<double>(k.calls));
    mine.push_back(static_cast<double>(k.sent));
    mine.push_back(static_cast<double>(k.received));
  }
  const auto all = gather(*world, mine);
  if (world->rank() != 0) return;
  const std::size_t n = static_cast<std::size_t>(o.steps);
  for (std::size_t i = 0; i < n; ++i) {
    double slowest = 0;
    for (const auto& v : all) slowest = std::max(slowest, v[i]);
    result.step_s.push_back(slowest);
  }
  for (const auto& v : all) {
    result.comm_us += v[n];
    result.overlapped_us += v[n + 1];
    result.alloc_peak = std::max(result.alloc_peak, v[n + 2]);
    result.rss_peak = std::max(result.rss_peak, v[n + 3]);
    result.step_peak = std::max(result.step_peak, v[n + 4]);
    result.phases += {v[n + 5], v[n + 6], v[n + 7], v[n + 8]};
    TrafficCounts rank_traffic;
    for (std::size_t k = 0; k < kCollectiveKinds; ++k)
      rank_traffic.kinds[k] = {static_cast<std::uint64_t>(v[n + 9 + 3 * k]),
                               static_cast<std::uint64_t>(v[n + 10 + 3 * k]),
                               static_cast<std::uint64_t>(v[n + 11 + 3 * k])};
    result.traffic += rank_traffic;
    result.max_rank_sent =
        std::max(result.max_rank_sent,
                 static_cast<double>(rank_traffic.total().sent) / static_cast<double>(o.steps));
  }
  const ParamCounts counts = count_params(trainer.engine());
  run.params = counts.all;
  result.flops =
      step_flops(counts.flop, trainer.config(), static_cast<std::int64_t>(result.tokens));
  if (config.model.kind == "gpt") run.gpt = model_zoo::resolve_gpt_dims(trainer.config().model);
}

void run_rank(const CommPtr& world, int local_rank, const Options& o, Run& run) {
  const bool lead = world->rank() == 0;
  if (!o.save_init.empty() || !o.save_data.empty()) {
    model_zoo::TrainerConfig config = train::trainer_config(o.train, local_rank);
    model_zoo::Trainer trainer = train::make_trainer(world, o.train, config);
    if (!o.save_init.empty())  // collective
      optim::save_full_params(trainer.engine().module(), o.save_init, "--save-init " + o.save_init);
    if (!o.save_data.empty() && lead) {
      model_zoo::Dataset data = train::load_data(o.train, trainer.config());
      ZRT_CHECK_ARG(data.kind == model_zoo::Dataset::Kind::tokens,
                    "--save-data writes token data (gpt)");
      zrt::write_safetensors(o.save_data, {{"tokens", data.tokens}});
    }
  }
  const int threads = kernels::cpu_threads();  // this rank's, as run_ranks set them
  Peak peak;
  std::string device_name;
  if (o.train.device == "cuda")
    device_name =
        cuda_device_name(train::trainer_config(o.train, local_rank).engine.zero.device.index);
  if (o.peak_gflops > 0)
    peak = {o.peak_gflops, "given"};
  else if (o.train.device == "cuda")
    peak = cuda_datasheet_peak(device_name, o.dtype);
  else
    peak = {measured_peak_gflops(*world, threads), fma_isa()};
  std::vector<Result> results;
  for (int depth : o.prefetch)
    for (const std::string& mode : o.checkpointing)
      for (const LinkModel& link : o.links)
        for (bool early : o.early_gathers) {
          Result& r = results.emplace_back();
          std::tie(r.prefetch, r.checkpointing, r.link, r.gather_after_update) =
              std::tuple(depth, mode, link, early);
        }
  for (int round = 0; round < o.rounds; ++round)
    for (Result& r : results) time_variant(world, local_rank, o, r, run);
  if (!lead) return;
  run.results = std::move(results);
  run.peak = peak;
  run.device_name = device_name;
  run.threads = threads;
}

}  // namespace

int bench_train(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const double rss_base = static_cast<double>(process_memory().resident);
  Run run;
  int world_size = 1;
  train::run_ranks(
      o.train.ranks,
      [&](const CommPtr& world, int local_rank, const CommPtr& /*host*/) {
        if (world->rank() == 0) world_size = world->size();
        run_rank(world, local_rank, o, run);
      },
      o.threads, train::world_device(o.train), parse_world_transport(o.train.transport));
  if (run.results.empty()) return 0;  // not rank 0 of an MPI world
  constexpr double MiB = 1024.0 * 1024.0;
  const train::TrainOptions& t = o.train;
  const model_zoo::TrainerConfig& c = t.trainer;
  const std::string streams =
      optim::cpu_streams_name(c.engine.zero.cpu_streams.value_or(optim::default_cpu_streams()));
  const double base_step = median(run.results.front().step_s);
  if (!o.json)
    std::printf(
        "zrt-bench train: %s/%s, %lld parameters, batch %lld x %lld, %s (reduce %s), strategy %s, "
        "%d rank(s) x %d thread(s), %s%s\n",
        c.model.kind.c_str(), c.model.preset.c_str(), static_cast<long long>(run.params),
        static_cast<long long>(c.batch_size),
        static_cast<long long>(c.model.kind == "gpt" ? c.seq_len : 1), o.dtype.c_str(),
        o.reduce_dtype.c_str(), o.strategy.c_str(), world_size, run.threads,
        t.device == "cuda" ? "on cuda, " : "cpu streams ",
        t.device == "cuda" ? run.device_name.c_str() : streams.c_str());
  const bool peak_known = run.peak.gflops > 0;
  for (const Result& r : run.results) {
    std::vector<double> sorted = r.step_s;
    std::sort(sorted.begin(), sorted.end());
    const double step = median(r.step_s);
    const double gflops = r.flops / step / 1e9;
    const double steps =
        static_cast<double>(r.step_s.size()) * world_size;  // timed steps of all ranks
    const double comm_ms = r.comm_us / steps / 1e3,
                 overlap = r.comm_us > 0 ? r.overlapped_us / r.comm_us : 0;
    const PhaseTimes& p = r.phases;  // per step and rank below
    const char* phase_clock = t.device == "cuda" ? "cuda events" : "host clock";
    // Bytes on the link per step and rank, by kind.
    const KindTraffic total = r.traffic.total();
    nlohmann::ordered_json sent_by_kind;
    for (std::size_t k = 0; k < kCollectiveKinds; ++k)
      sent_by_kind[collective_kind_name(static_cast<CollectiveKind>(k))] =
          static_cast<double>(r.traffic.kinds[k].sent) / steps;
    nlohmann::ordered_json j = {
        {"model", c.model.kind},
        {"preset", c.model.preset},
        {"n_layer", run.gpt.n_layer},
        {"n_head", run.gpt.n_head},
        {"n_embd", run.gpt.n_embd},
        {"vocab_size", run.gpt.vocab_size},
        {"params", run.params},
        {"device", t.device},
        {"device_name", t.device == "cuda" ? run.device_name : "cpu"},
        {"ranks", world_size},
        {"threads", run.threads},
        {"strategy", o.strategy},
        {"dtype", o.dtype},
        {"reduce_dtype", o.reduce_dtype},
        {"gather_dtype", o.gather_dtype},
        {"batch_size", c.batch_size},
        {"seq_len", c.model.kind == "gpt" ? c.seq_len : 1},
        {"prefetch", r.prefetch},
        {"activation_checkpointing", r.checkpointing},
        {"gather_after_update", r.gather_after_update},
        {"offload_optimizer", c.engine.zero.offload_optimizer.str()},
        {"link", r.link.str()},
        {"link_gbps", r.link.gbps},
        {"link_us", r.link.latency_us},
        {"cpu_streams", streams},
        {"warmup", o.warmup},
        {"steps", o.steps},
        {"rounds", o.rounds},
        {"step_ms", step * 1e3},
        {"step_ms_min", sorted.front() * 1e3},
        {"step_ms_max", sorted.back() * 1e3},
        {"step_vs_first", step / base_step},
        {"tokens_per_s", r.tokens / step},
        {"gflop_per_step", r.flops / 1e9},
        {"gflops", gflops},
        {"peak_gflops", run.peak.gflops},
        {"peak_source", run.peak.source},
        {"frac_peak",
         peak_known ? nlohmann::ordered_json(gflops / run.peak.gflops) : nlohmann::ordered_json()},
        {"comm_ms_per_step", comm_ms},
        {"comm_overlapped", overlap},
        {"forward_ms", p.forward_ms / steps},
        {"backward_ms", p.backward_ms / steps},
        {"optimizer_ms", p.optimizer_ms / steps},
        {"comm_phase_ms", p.comm_ms / steps},
        {"sent_bytes_per_step", static_cast<double>(total.sent) / steps},
        {"received_bytes_per_step", static_cast<double>(total.received) / steps},
        {"sent_bytes_per_step_max_rank", r.max_rank_sent},
        {"sent_bytes_per_step_by_kind", sent_by_kind},
        {"collectives_per_step", static_cast<double>(total.calls) / steps},
        {"phase_clock", phase_clock},
        {"loss_first", r.loss_first},
        {"loss_last", r.loss_last},
        {"step_peak_MiB", r.step_peak / MiB},
        {"alloc_peak_MiB", r.alloc_peak / MiB},
        {"rss_peak_MiB", r.rss_peak / MiB},
        {"rss_base_MiB", rss_base / MiB}};
    if (o.json) {
      std::printf("%s\n", j.dump().c_str());
      continue;
    }
    std::printf(
        "prefetch %d, activation checkpointing %s, link model %s, gathers after the "
        "update %s\n",
        r.prefetch, r.checkpointing.c_str(), r.link.str().c_str(),
        r.gather_after_update ? "on" : "off");
    std::printf(
        "  step      median %.1f ms (min %.1f, max %.1f) over %zu steps after %d warm-up (%d "
        "round(s))",
        step * 1e3, sorted.front() * 1e3, sorted.back() * 1e3, r.step_s.size(), o.warmup, o.rounds);
    if (&r != &run.results.front()) std::printf(", %.3fx the first's", step / base_step);
    if (peak_known)
      std::printf(
          "\n  speed     %.0f tokens/s, %.2f GFLOP/s = %.1f%% of %.1f GFLOP/s %s peak (%s)\n",
          r.tokens / step, gflops, 100 * gflops / run.peak.gflops, run.peak.gflops,
          t.device == "cuda" ? o.dtype.c_str() : "fp32",
          o.peak_gflops > 0    ? "--peak-gflops/--peak-tflops"
          : t.device == "cuda" ? run.peak.source.c_str()
                               : ("measured, " + run.peak.source).c_str());
    else
      std::printf(
          "\n  speed     %.0f tokens/s, %.2f GFLOP/s (no peak known for %s: give --peak-tflops)\n",
          r.tokens / step, gflops, run.device_name.c_str());
    std::printf("  comm      %.1f ms per step and rank, %.0f%% of it while the rank computed\n",
                comm_ms, 100 * overlap);
    std::printf(
        "  traffic   %.2f MiB sent, %.2f MiB received per step and rank (largest rank %.2f MiB "
        "sent) in %.0f collectives: all_gather %.2f, reduce_scatter %.2f, all_reduce %.2f, "
        "broadcast %.2f, all_to_all %.2f MiB sent (ring; all_to_all pairwise)\n",
        static_cast<double>(total.sent) / steps / MiB,
        static_cast<double>(total.received) / steps / MiB, r.max_rank_sent / MiB,
        static_cast<double>(total.calls) / steps,
        static_cast<double>(r.traffic[CollectiveKind::all_gather].sent) / steps / MiB,
        static_cast<double>(r.traffic[CollectiveKind::reduce_scatter].sent) / steps / MiB,
        static_cast<double>(r.traffic[CollectiveKind::all_reduce].sent) / steps / MiB,
        static_cast<double>(r.traffic[CollectiveKind::broadcast].sent) / steps / MiB,
        static_cast<double>(r.traffic[CollectiveKind::all_to_all].sent) / steps / MiB);
    std::printf(
        "  phases    forward %.2f ms, backward %.2f ms, optimizer %.2f ms, "
        "communication %.2f ms per step and rank (%s)\n",
        p.forward_ms / steps, p.backward_ms / steps, p.optimizer_ms / steps, p.comm_ms / steps,
        phase_clock);
    std::printf(
        "  memory    step peak %.1f MiB allocated, %sallocator peak reserved %.1f MiB per rank "
        "(largest), "
        "process peak RSS %.1f MiB (%.1f MiB before training)\n",
        r.step_peak / MiB, t.device == "cuda" ? "device " : "", r.alloc_peak / MiB,
        r.rss_peak / MiB, rss_base / MiB);
    std::printf("  loss      %.4f at the first step, %.4f at the last\n", r.loss_first,
                r.loss_last);
  }
  return 0;
}

}  // namespace zrt::bench
