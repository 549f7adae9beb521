// zrt-train's command line: every flag, its default, and its validation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "zrt/model_zoo/trainer/trainer.h"

namespace zrt::train {

// zrt-train's defaults where they differ from the layers': 200 steps of
// nanoGPT's AdamW (lr 3e-3, beta2 0.95, weight decay 0.1, clipping at 1, 5
// warm-up steps) and a stop after 50 skipped steps in a row.
inline model_zoo::TrainerConfig default_trainer_config() {
  model_zoo::TrainerConfig t;
  t.steps = 200;
  t.schedule.max_lr = 3e-3;
  t.schedule.min_lr = 3e-4;  // --lr / 10 unless given
  t.schedule.warmup_steps = 5;
  optim::AdamWOptions& a = t.engine.zero.adamw;
  a.beta2 = 0.95;
  a.weight_decay = 0.1;
  a.max_grad_norm = 1.0;
  a.max_consecutive_skips = 50;
  return t;
}

// A compute dtype by the name --dtype and --reduce-dtype give it, with the
// reduce-scatter's wire dtype of that name.
struct DTypeFlag {
  const char* name;
  DType dtype;
  optim::ReduceDType reduce;
};
// The one table of both flags' names: --dtype's choices, and the first of
// --reduce-dtype's (reduce_dtype_flags).
inline constexpr DTypeFlag kDTypeFlags[] = {{"fp32", DType::f32, optim::ReduceDType::f32},
                                            {"bf16", DType::bf16, optim::ReduceDType::bf16},
                                            {"fp16", DType::f16, optim::ReduceDType::f16}};

// The name --dtype and --reduce-dtype give `t` (fp32, bf16, fp16).
const char* dtype_flag(DType t);

struct TrainOptions {
  // What the run trains and how (the model, the batch, the schedule, the
  // engine, its module and AdamW), parsed straight into the options of the
  // layer that reads them (Note [Options owned by their layer]): a flag names
  // its field there, and nothing copies it across. Defaults the flags leave
  // open (--min-lr, --warmup, --block-size) are resolved once, after parsing.
  // The device is resolved per rank (train_setup.h).
  model_zoo::TrainerConfig trainer = default_trainer_config();
  std::string data;                // empty: the embedded default dataset
  std::string device = "cpu";      // cpu | cuda
  std::string transport = "auto";  // a launched world's: auto | mpi | nccl (WorldTransport)
  bool tf32 = false;               // fp32 CUDA GEMMs on TF32 tensor cores (Note [TF32 GEMMs])
  int ranks = 0;                   // >0: that many local ranks (threads) in this process
  bool plan = false;               // print the memory plan instead of training (Note [Memory plan])
  std::string fit;       // with plan: a memory budget, e.g. "24GiB"; list the settings that fit
  std::string fit_host;  // with fit: each rank's host memory budget (Note [Settings that fit])
  int threads = 0;       // CPU kernel threads per rank (0: its share of the cores)
  // files (--init-from is the trainer's)
  std::string save, metrics;
  std::string trace;  // Chrome trace per rank (T.json, or T.rank-R.json with several ranks)
  int log_every = 10;
  // checkpoints (Note [Checkpoint format])
  std::string checkpoint_dir;  // empty: no checkpoints
  int checkpoint_every = 0;    // > 0: save every N steps (and at the end, and on SIGTERM/SIGINT)
  int keep_last = 0;           // > 0: keep only the newest K steps
  bool resume = false;         // --resume given
  std::string resume_from;     // its value; empty: `latest` under checkpoint_dir
  // Every flag's value as parsed (given or default), numbers and booleans
  // normalised, by flag name: what the ranks compare (rank_agreement_json).
  std::map<std::string, std::string> flag_values;
  // --block-size (0: not given) and --warmup as parsed, before the defaults
  // that hang on other flags are resolved: what checkpoints have always
  // stored (run_flags_json). Unset: options not from the command line, whose
  // resolved values are stored.
  struct AsGiven {
    std::int64_t block_size = 0;
    std::int64_t warmup = 0;
  };
  std::optional<AsGiven> as_given;
};

// --trace's file for rank `rank` of `size`: T.json for one rank,
// T.rank-R.json for rank R of several.
std::string trace_path(const std::string& path, int rank, int size);

// More local ranks than this in one process is a mistake, not a request.
inline constexpr int kMaxLocalRanks = 1024;
// Whether zrt-train warns of --weight-decay, and its divergence message names
// it: above 1 (typical: 0.01..0.1) and taking a tenth or more of every matrix
// away each step (lr x weight decay; a huge --lr is warned of by itself).
inline bool weight_decay_too_large(double lr, double weight_decay) {
  return weight_decay > 1 && lr * weight_decay >= 0.1;
}

// Parses argv; returns false (after printing help) when the program should
// exit 0 without training, throws InvalidArgument naming a bad flag value.
bool parse_train_options(int argc, char** argv, TrainOptions& out);

}  // namespace zrt::train
