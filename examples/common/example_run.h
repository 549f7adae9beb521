// What both examples share: their command line, random initial values, and
// what a run does around its steps (resume, report the loss, checkpoint).
//
//   [--dtype f32|bf16] [--steps N] [--micro-batches M]
//   [--checkpoint-dir DIR [--save-at K]] [--resume]
//
// --dtype bf16 gathers bf16 parameters and takes bf16 gradients (the fp32
// master and the AdamW state stay fp32). With --checkpoint-dir the run saves
// its whole state (parameters, AdamW moments, step) into DIR after step K
// and stops; --resume loads DIR's latest checkpoint, saved at any rank count,
// and trains on to --steps.
#pragma once

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "zrt/optim/checkpoint/module_checkpoint.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/tensor.h"

namespace example {

struct Options {
  zrt::DType dtype = zrt::DType::f32;
  int steps = 100;
  int micro_batches = 1;
  std::string checkpoint_dir;
  int save_at = -1;
  bool resume = false;
};

inline Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      ZRT_CHECK_ARG(i + 1 < argc, a, " needs a value");
      return argv[++i];
    };
    if (a == "--dtype") {
      const std::string d = value();
      ZRT_CHECK_ARG(d == "f32" || d == "bf16", "--dtype is f32 or bf16, not ", d);
      o.dtype = d == "bf16" ? zrt::DType::bf16 : zrt::DType::f32;
    } else if (a == "--steps") {
      o.steps = std::stoi(value());
    } else if (a == "--micro-batches") {
      o.micro_batches = std::stoi(value());
    } else if (a == "--checkpoint-dir") {
      o.checkpoint_dir = value();
    } else if (a == "--save-at") {
      o.save_at = std::stoi(value());
    } else if (a == "--resume") {
      o.resume = true;
    } else {
      ZRT_THROW(zrt::InvalidArgument, "unknown option ", a);
    }
  }
  ZRT_CHECK_ARG(o.steps > 0, "--steps must be positive");
  ZRT_CHECK_ARG(o.micro_batches > 0, "--micro-batches must be positive");
  ZRT_CHECK_ARG(!o.resume || !o.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  return o;
}

// fp32 values drawn from N(0, scale²): `rng` seeded alike gives every rank
// the same initial values.
inline zrt::Tensor random_tensor(zrt::Shape shape, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(zrt::shape_numel(shape)));
  for (float& x : v) x = normal(rng);
  return zrt::Tensor::from_host(v.data(), shape, zrt::DType::f32);
}

// The mean over the world of every rank's `mine` (a collective): the global
// loss, when each rank's is the mean over its own rows.
inline double global_mean(const zrt::CommPtr& world, double mine) {
  zrt::Tensor t = zrt::Tensor::from_doubles({mine}, zrt::DType::f64);  // host memory
  world->all_reduce(t, zrt::ReduceOp::avg);
  return t.item(0);
}

// The step to start at: 0, or with --resume the step after the latest
// checkpoint in --checkpoint-dir (saved on any rank count), loaded into `m`.
inline int first_step(zrt::optim::ZeroModule& m, const Options& o) {
  if (!o.resume) return 0;
  const int first = static_cast<int>(zrt::optim::load_checkpoint(m, o.checkpoint_dir).next_step);
  if (m.world()->rank() == 0)
    std::printf("resumed at step %d on %d rank(s)\n", first, m.world()->size());
  return first;
}

// After step `step` (0-based) whose global loss is `loss`: rank 0 prints it
// every 20 steps and at the last; at --save-at the whole state is saved into
// --checkpoint-dir. Returns whether the run goes on.
inline bool end_of_step(zrt::optim::ZeroModule& m, const Options& o, int step, double loss) {
  const bool rank0 = m.world()->rank() == 0;
  if (rank0 && (step % 20 == 0 || step + 1 == o.steps))
    std::printf("step %3d  loss %.6f\n", step, loss);
  if (step == o.save_at && !o.checkpoint_dir.empty()) {
    const std::string dir =
        zrt::optim::save_checkpoint(m, step + 1, zrt::optim::checkpoint_into(o.checkpoint_dir));
    if (rank0) std::printf("saved %s after step %d\n", dir.c_str(), step);
    return false;
  }
  if (rank0 && step + 1 == o.steps) std::printf("trained on %d rank(s)\n", m.world()->size());
  return true;
}

}  // namespace example
