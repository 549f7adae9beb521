// A model built from zrt's model-zoo layers: a three-layer MLP classifier,
// fc1 -> GELU -> fc2 -> ReLU -> fc3 -> cross-entropy, trained under ZeRO-3
// with zrt::optim::ZeroModule. Each layer binds once to its parameters' views
// (ZeroModule::param_views), which stay valid while the unit's memory comes
// and goes; its forward and backward then run inside the unit's scopes. Runs
// as one process or under `mpirun -np N`; each rank takes its share of every
// batch, in micro-batches, and the loss printed is the global mean, so every
// world size prints the same losses.
//
//   zrt-example-layers [--dtype f32|bf16] [--steps N] [--micro-batches M]
//                      [--checkpoint-dir DIR [--save-at K]] [--resume]
//
// (the options: examples/common/example_run.h)
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/example_run.h"
#include "zrt/model_zoo/layers/activation_layer.h"
#include "zrt/model_zoo/layers/cross_entropy.h"
#include "zrt/model_zoo/layers/linear.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/launched_world.h"

namespace {

constexpr int kIn = 20, kHidden = 64, kClasses = 5, kBatch = 96;

// Rows [first, first + rows) of step `step`'s batch, the same on every rank:
// x ~ N(0, 1) in `dtype`, labelled by which of kClasses fixed directions
// x points along most.
struct Batch {
  zrt::Tensor x, labels;
};
Batch make_batch(int step, int first, int rows, zrt::DType dtype) {
  std::mt19937 rng(1000 + step);
  std::normal_distribution<float> normal;
  std::vector<float> x(kBatch * kIn);
  for (float& v : x) v = normal(rng);
  std::vector<std::int32_t> labels(rows);
  for (int r = 0; r < rows; ++r) {
    float best = -1e30f;
    for (int c = 0; c < kClasses; ++c) {
      float s = 0;
      for (int i = 0; i < kIn; ++i) s += x[(first + r) * kIn + i] * ((i * 7 + c * 3) % 5 - 2.0f);
      if (s > best) best = s, labels[r] = c;
    }
  }
  zrt::Tensor xs = zrt::Tensor::from_host(x.data() + first * kIn, {rows, kIn}, zrt::DType::f32);
  return {xs.to(dtype), zrt::Tensor::from_host(labels.data(), {rows}, zrt::DType::i32)};
}

}  // namespace

int main(int argc, char** argv) try {
  const example::Options opt = example::parse(argc, argv);
  zrt::World w = zrt::init_world();  // mpirun, torchrun variables, or one process
  const int rank = w.comm->rank(), world = w.comm->size(), micro = opt.micro_batches;
  ZRT_CHECK_ARG(kBatch % (world * micro) == 0, "the batch of ", kBatch, " rows must divide over ",
                world, " ranks × ", micro, " micro-batches");
  const int rows = kBatch / world / micro;  // this rank's rows per micro-batch

  zrt::optim::ZeroModule m(w.comm, {.dtype = opt.dtype, .adamw = {.weight_decay = 0.01}});
  std::mt19937 init(7);  // the same initial values on every rank
  auto unit = [&](const char* name, int out, int in) {
    return m.add_unit(name, {{"weight", example::random_tensor({out, in}, 0.3f, init)},
                             {"bias", zrt::Tensor::zeros({out}, zrt::DType::f32)}});
  };
  const auto u1 = unit("fc1", kHidden, kIn), u2 = unit("fc2", kHidden, kHidden),
             u3 = unit("fc3", kClasses, kHidden);
  // Bound once: views that stay valid across reshards (Note [Layers own no parameters]).
  auto param = [&](zrt::optim::ZeroModule::Unit u, const char* name) {
    const auto v = m.param_views(u, name);
    return zrt::model_zoo::Param{v.param, v.grad};
  };
  zrt::model_zoo::Linear fc1(param(u1, "weight"), param(u1, "bias"));
  zrt::model_zoo::Linear fc2(param(u2, "weight"), param(u2, "bias"));
  zrt::model_zoo::Linear fc3(param(u3, "weight"), param(u3, "bias"));
  zrt::model_zoo::Gelu act1;
  zrt::model_zoo::Relu act2;
  zrt::model_zoo::CrossEntropy cross_entropy;
  const auto add = zrt::model_zoo::GradMode::accumulate;

  // A scope and its layers on one line:
  // clang-format off
  for (int step = example::first_step(m, opt); step < opt.steps; ++step) {
    std::vector<zrt::Tensor> losses;  // this rank's, one per micro-batch
    for (int mb = 0; mb < micro; ++mb) {
      const Batch b = make_batch(step, (rank * micro + mb) * rows, rows, opt.dtype);
      zrt::Tensor h;
      { auto s = m.forward(u1); h = act1.forward(fc1.forward(b.x)); }
      { auto s = m.forward(u2); h = act2.forward(fc2.forward(h)); }
      { auto s = m.forward(u3); h = fc3.forward(h); }
      // Divided by this rank's rows of the step: gradients are averaged over the ranks.
      losses.push_back(cross_entropy.forward(h, b.labels, rows * micro));
      zrt::Tensor d = cross_entropy.backward();
      const bool sync = mb + 1 == micro;  // reduce the gradients once, after the last micro-batch
      { auto s = m.backward(u3, sync); d = fc3.backward(d, add); }
      { auto s = m.backward(u2, sync); d = fc2.backward(act2.backward(d), add); }
      { auto s = m.backward(u1, sync); fc1.backward(act1.backward(d), add); }
    }
    m.step(1e-2 * (1.0 - step / double(opt.steps)));  // AdamW on this rank's shard

    // The global loss: this rank's, read once its compute has run, averaged over the world.
    m.synchronize();
    double mine = 0;
    for (const zrt::Tensor& l : losses) mine += l.item(0);
    if (!example::end_of_step(m, opt, step, example::global_mean(w.comm, mine))) break;
  }
  // clang-format on
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "zrt-example-layers: %s\n", e.what());
  return 1;
}
