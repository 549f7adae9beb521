// A model that is not in zrt's zoo: two-layer regression, y = W2 relu(W1 x +
// b1) + b2, with its own forward and backward written by hand, trained under
// ZeRO-3 with zrt::optim::ZeroModule. Runs as one process or under `mpirun -np N`;
// each rank takes its share of every batch, and the loss printed is the
// global mean, so every world size prints the same losses.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/launch.h"

namespace {

constexpr int kIn = 8, kHidden = 32, kBatch = 64, kSteps = 100;

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

zrt::Tensor random_tensor(zrt::Shape shape, float scale, std::mt19937& rng) {
  zrt::Tensor t = zrt::Tensor::empty(shape, zrt::DType::f32);
  std::normal_distribution<float> normal(0.0f, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  return t;
}

// out[n, o] = in[n, :] . w[o, :] + b[o]
void linear(const float* in, const zrt::Tensor& w, const zrt::Tensor& b, int n, float* out) {
  const int o_dim = static_cast<int>(w.size(0)), i_dim = static_cast<int>(w.size(1));
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < o_dim; ++o) {
      float s = b.data<float>()[o];
      for (int i = 0; i < i_dim; ++i) s += in[r * i_dim + i] * w.data<float>()[o * i_dim + i];
      out[r * o_dim + o] = s;
    }
}

// Accumulates dw, db from d_out and in; writes d_in (if given).
void linear_backward(const float* in, const float* d_out, const zrt::Tensor& w, const zrt::Tensor& dw,
                     const zrt::Tensor& db, int n, float* d_in) {
  const int o_dim = static_cast<int>(w.size(0)), i_dim = static_cast<int>(w.size(1));
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < o_dim; ++o) {
      const float g = d_out[r * o_dim + o];
      db.data<float>()[o] += g;
      for (int i = 0; i < i_dim; ++i) dw.data<float>()[o * i_dim + i] += g * in[r * i_dim + i];
    }
  if (!d_in) return;
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < i_dim; ++i) {
      float s = 0;
      for (int o = 0; o < o_dim; ++o) s += d_out[r * o_dim + o] * w.data<float>()[o * i_dim + i];
      d_in[r * i_dim + i] = s;
    }
}

}  // namespace

int main() {
  zrt::World w = zrt::init_world();
  const int rank = w.comm->rank(), world = w.comm->size();
  ZRT_CHECK_ARG(kBatch % world == 0, "the batch of ", kBatch, " rows must divide over ", world, " ranks");
  const int n = kBatch / world;  // this rank's rows

  zrt::optim::ZeroModuleOptions options;
  options.adamw.weight_decay = 0.01;
  zrt::optim::ZeroModule model(w.comm, options);
  std::mt19937 init(7);  // the same initial values on every rank
  const auto l1 = model.add_unit("l1", {{"weight", random_tensor({kHidden, kIn}, 0.3f, init)},
                                        {"bias", random_tensor({kHidden}, 0.1f, init)}});
  const auto l2 = model.add_unit("l2", {{"weight", random_tensor({1, kHidden}, 0.2f, init)},
                                        {"bias", random_tensor({1}, 0.1f, init)}});

  std::vector<float> x, y, h(n * kHidden), a(n * kHidden), out(n), d_out(n), d_a(n * kHidden);
  for (int step = 0; step < kSteps; ++step) {
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
      linear_backward(a.data(), d_out.data(), p.param("weight"), p.grad("weight"), p.grad("bias"), n, d_a.data());
    }
    for (int i = 0; i < n * kHidden; ++i) d_a[i] = h[i] > 0 ? d_a[i] : 0;
    {
      auto p = model.backward(l1);
      linear_backward(xs, d_a.data(), p.param("weight"), p.grad("weight"), p.grad("bias"), n, nullptr);
    }
    model.step(1e-2 * (1.0 - step / double(kSteps)));  // gradients are averaged over the ranks

    zrt::Tensor l = zrt::Tensor::from_doubles({loss}, zrt::DType::f64);
    w.comm->all_reduce(l, zrt::ReduceOp::avg);
    if (rank == 0 && (step % 20 == 0 || step + 1 == kSteps))
      std::printf("step %3d  loss %.6f\n", step, l.item(0));
  }
  if (rank == 0) std::printf("trained on %d rank(s)\n", world);
  return 0;
}
