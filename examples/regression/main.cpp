// A model that is not in zrt's zoo: two-layer regression, y = W2 relu(W1 x +
// b1) + b2, with its own forward and backward written by hand (zrt has no
// autograd: a model computes its own gradients), trained under ZeRO-3 with
// zrt::optim::ZeroModule. Runs as one process or under `mpirun -np N`; each
// rank takes its share of every batch, and the loss printed is the global
// mean, so every world size prints the same losses.
//
//   zrt-example-regression [--dtype f32|bf16] [--steps N]
//                          [--checkpoint-dir DIR [--save-at K]] [--resume]
//
// (the options: examples/common/example_run.h)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/example_run.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/launched_world.h"

namespace {

constexpr int kIn = 8, kHidden = 32, kBatch = 64;

// The data: a fixed teacher function of x, the same on every rank.
void make_batch(int step, std::vector<float>& x, std::vector<float>& y) {
  std::mt19937 rng(1000 + step);
  std::normal_distribution<float> normal;
  x.resize(kBatch * kIn);
  y.resize(kBatch);
  for (int r = 0; r < kBatch; ++r) {
    float s = 0;
    for (int i = 0; i < kIn; ++i) s += (x[r * kIn + i] = normal(rng)) * (i % 2 ? 0.5f : -0.25f);
    y[r] = std::sin(s) + 0.1f * s * s;
  }
}

// A parameter as fp32 on the host, whatever the compute dtype (the loops
// below are plain float code).
std::vector<float> floats(const zrt::Tensor& t) {
  const zrt::Tensor f = t.to(zrt::Device::cpu()).to(zrt::DType::f32);
  return {f.data<float>(), f.data<float>() + f.numel()};
}

// Adds fp32 values to a gradient view of any dtype.
void accumulate(zrt::Tensor grad, const std::vector<float>& add) {
  std::vector<float> sum = floats(grad);
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += add[i];
  grad.copy_(zrt::Tensor::from_host(sum.data(), grad.shape(), zrt::DType::f32));
}

// out[n, o] = in[n, :] . w[o, :] + b[o]
void linear(const float* in, const zrt::Tensor& w_t, const zrt::Tensor& b_t, int n, float* out) {
  const int o_dim = static_cast<int>(w_t.size(0)), i_dim = static_cast<int>(w_t.size(1));
  const std::vector<float> w = floats(w_t), b = floats(b_t);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < o_dim; ++o) {
      float s = b[o];
      for (int i = 0; i < i_dim; ++i) s += in[r * i_dim + i] * w[o * i_dim + i];
      out[r * o_dim + o] = s;
    }
}

// Accumulates dw, db from d_out and in; writes d_in (if given).
void linear_backward(const float* in, const float* d_out, const zrt::Tensor& w_t,
                     const zrt::Tensor& dw_t, const zrt::Tensor& db_t, int n, float* d_in) {
  const int o_dim = static_cast<int>(w_t.size(0)), i_dim = static_cast<int>(w_t.size(1));
  const std::vector<float> w = floats(w_t);
  std::vector<float> dw(w.size(), 0.0f), db(static_cast<std::size_t>(o_dim), 0.0f);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < o_dim; ++o) {
      const float g = d_out[r * o_dim + o];
      db[o] += g;
      for (int i = 0; i < i_dim; ++i) dw[o * i_dim + i] += g * in[r * i_dim + i];
    }
  accumulate(dw_t, dw);
  accumulate(db_t, db);
  if (!d_in) return;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < i_dim; ++i) {
      float s = 0;
      for (int o = 0; o < o_dim; ++o) s += d_out[r * o_dim + o] * w[o * i_dim + i];
      d_in[r * i_dim + i] = s;
    }
}

}  // namespace

int main(int argc, char** argv) try {
  const example::Options opt = example::parse(argc, argv);
  ZRT_CHECK_ARG(opt.micro_batches == 1, "zrt-example-regression takes no --micro-batches");
  zrt::World w = zrt::init_world();  // mpirun, torchrun variables, or one process
  const int rank = w.comm->rank(), world = w.comm->size();
  ZRT_CHECK_ARG(kBatch % world == 0, "the batch of ", kBatch, " rows must divide over ", world,
                " ranks");
  const int n = kBatch / world;  // this rank's rows

  zrt::optim::ZeroModule model(w.comm, {.dtype = opt.dtype, .adamw = {.weight_decay = 0.01}});
  std::mt19937 init(7);  // the same initial values on every rank
  const auto l1 =
      model.add_unit("l1", {{"weight", example::random_tensor({kHidden, kIn}, 0.3f, init)},
                            {"bias", example::random_tensor({kHidden}, 0.1f, init)}});
  const auto l2 =
      model.add_unit("l2", {{"weight", example::random_tensor({1, kHidden}, 0.2f, init)},
                            {"bias", example::random_tensor({1}, 0.1f, init)}});

  std::vector<float> x, y, h(n * kHidden), a(n * kHidden), out(n), d_out(n), d_a(n * kHidden);
  for (int step = example::first_step(model, opt); step < opt.steps; ++step) {
    make_batch(step, x, y);
    const float* xs = x.data() + rank * n * kIn;
    const float* ys = y.data() + rank * n;
    {
      auto p = model.forward(l1);
      linear(xs, p.param("weight"), p.param("bias"), n, h.data());
    }
    for (int i = 0; i < n * kHidden; ++i) a[i] = h[i] > 0 ? h[i] : 0;
    {
      auto p = model.forward(l2);
      linear(a.data(), p.param("weight"), p.param("bias"), n, out.data());
    }
    double loss = 0;  // mean squared error over this rank's rows
    for (int r = 0; r < n; ++r) {
      loss += (out[r] - ys[r]) * (out[r] - ys[r]) / n;
      d_out[r] = 2 * (out[r] - ys[r]) / n;
    }
    {
      auto p = model.backward(l2);
      linear_backward(a.data(), d_out.data(), p.param("weight"), p.grad("weight"), p.grad("bias"),
                      n, d_a.data());
    }
    for (int i = 0; i < n * kHidden; ++i) d_a[i] = h[i] > 0 ? d_a[i] : 0;
    {
      auto p = model.backward(l1);
      linear_backward(xs, d_a.data(), p.param("weight"), p.grad("weight"), p.grad("bias"), n,
                      nullptr);
    }
    model.step(1e-2 * (1.0 - step / double(opt.steps)));  // gradients are averaged over the ranks

    if (!example::end_of_step(model, opt, step, example::global_mean(w.comm, loss))) break;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "zrt-example-regression: %s\n", e.what());
  return 1;
}
