// Each model-zoo CUDA kernel against its CPU twin on the same inputs, with
// outputs poisoned first. Tolerance, relative to 1 + max |CPU result|: 1e-4
// for f32 (the GPU sums in a different order: warp trees, cuBLAS tiles) and
// 1e-2 for bf16 (one output rounding apart).
#include <boost/test/unit_test.hpp>
#include <functional>
#include <random>

#include "zrt/kernels/nn/activation.h"
#include "zrt/kernels/nn/attention.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/embedding.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/layernorm.h"
#include "zrt/kernels/nn/nn_checks.h"
#include "zrt/kernels/nn/residual_add.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

const Device gpu = Device::cuda(0);

Tensor rnd(const Shape& shape, DType t, std::mt19937& gen) {
  std::uniform_real_distribution<double> dist(-2, 2);
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, t, Device::cpu(), shape);
}

Tensor poisoned(const Shape& shape, DType t, Device d) { return Tensor::full(shape, NAN, t, d); }

void check_twin(const std::string& what, const Tensor& cpu, const Tensor& dev) {
  const double tol = cpu.dtype() == DType::bf16 ? 1e-2 : 1e-4;
  auto a = cpu.to_doubles(), b = dev.to(Device::cpu()).to_doubles();
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double err = 0, scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    // A NaN on either side (a poisoned output left unwritten, or a CPU twin
    // that went wrong) is a mismatch: std::max would drop it.
    const double d = std::abs(a[i] - b[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
    scale = std::max(scale, 1 + std::abs(a[i]));
  }
  BOOST_TEST((std::isfinite(scale) && err <= tol * scale), what << " " << dtype_name(cpu.dtype()) << ": max |gpu - cpu| " << err);
}

const DType kDTypes[] = {DType::f32, DType::bf16};

}  // namespace

BOOST_AUTO_TEST_SUITE(nn_kernels_gpu)

BOOST_AUTO_TEST_CASE(gemm_twin) {
  std::mt19937 gen(31);
  for (DType t : kDTypes) {
    for (int tr = 0; tr < 4; ++tr) {
      const bool ta = tr & 1, tb = tr & 2;
      const std::int64_t m = 39, n = 23, k = 71;
      Tensor a = rnd(ta ? Shape{k, m} : Shape{m, k}, t, gen), b = rnd(tb ? Shape{n, k} : Shape{k, n}, t, gen);
      Tensor c = rnd({m, n}, t, gen), dc = c.to(gpu);
      gemm(a, ta, b, tb, c, 0.5, 1.0);
      gemm(a.to(gpu), ta, b.to(gpu), tb, dc, 0.5, 1.0);
      check_twin("gemm", c, dc);
    }
  }
}

BOOST_AUTO_TEST_CASE(activation_and_residual_twins) {
  std::mt19937 gen(32);
  for (DType t : kDTypes) {
    for (Activation act : {Activation::gelu, Activation::relu}) {
      Tensor x = rnd({1031}, t, gen), dy = rnd({1031}, t, gen);
      Tensor y = poisoned({1031}, t, Device::cpu()), dyg = poisoned({1031}, t, gpu);
      activation_forward(act, x, y);
      activation_forward(act, x.to(gpu), dyg);
      check_twin("activation_forward", y, dyg);
      Tensor dx = poisoned({1031}, t, Device::cpu()), dxg = poisoned({1031}, t, gpu);
      activation_backward(act, x, dy, dx);
      activation_backward(act, x.to(gpu), dy.to(gpu), dxg);
      check_twin("activation_backward", dx, dxg);
    }
    Tensor a = rnd({135}, t, gen), b = rnd({135}, t, gen);
    Tensor o = poisoned({135}, t, Device::cpu()), og = poisoned({135}, t, gpu);
    residual_add(a, b, o);
    residual_add(a.to(gpu), b.to(gpu), og);
    check_twin("residual_add", o, og);
  }
}

BOOST_AUTO_TEST_CASE(layernorm_twin) {
  std::mt19937 gen(33);
  for (DType t : kDTypes) {
    const std::int64_t rows = 37, c = 71;
    Tensor x = rnd({rows, c}, t, gen), w = rnd({c}, t, gen), b = rnd({c}, t, gen), dy = rnd({rows, c}, t, gen);
    Tensor y = poisoned({rows, c}, t, Device::cpu()), mean = poisoned({rows}, DType::f32, Device::cpu());
    Tensor rstd = poisoned({rows}, DType::f32, Device::cpu());
    Tensor yg = poisoned({rows, c}, t, gpu), meang = poisoned({rows}, DType::f32, gpu), rstdg = poisoned({rows}, DType::f32, gpu);
    layernorm_forward(x, w, b, y, mean, rstd);
    layernorm_forward(x.to(gpu), w.to(gpu), b.to(gpu), yg, meang, rstdg);
    check_twin("layernorm y", y, yg);
    check_twin("layernorm rstd", rstd, rstdg);
    Tensor dw = rnd({c}, t, gen), db = rnd({c}, t, gen), dwg = dw.to(gpu), dbg = db.to(gpu);
    Tensor dx = poisoned({rows, c}, t, Device::cpu()), dxg = poisoned({rows, c}, t, gpu);
    layernorm_backward(dy, x, w, mean, rstd, dx, dw, db, true);
    layernorm_backward(dy.to(gpu), x.to(gpu), w.to(gpu), meang, rstdg, dxg, dwg, dbg, true);
    check_twin("layernorm dx", dx, dxg);
    check_twin("layernorm dw", dw, dwg);
    check_twin("layernorm db", db, dbg);
  }
}

BOOST_AUTO_TEST_CASE(attention_twin) {
  std::mt19937 gen(34);
  for (DType t : kDTypes) {
    const std::int64_t batch = 2, seq = 23, c = 24, heads = 3;
    Tensor qkv = rnd({batch, seq, 3 * c}, t, gen), dout = rnd({batch, seq, c}, t, gen);
    Tensor out = poisoned({batch, seq, c}, t, Device::cpu()), lse = poisoned({batch, heads, seq}, DType::f32, Device::cpu());
    Tensor outg = poisoned({batch, seq, c}, t, gpu), lseg = poisoned({batch, heads, seq}, DType::f32, gpu);
    attention_forward(qkv, out, lse, heads);
    attention_forward(qkv.to(gpu), outg, lseg, heads);
    check_twin("attention out", out, outg);
    check_twin("attention lse", lse, lseg);
    Tensor dqkv = poisoned(qkv.shape(), t, Device::cpu()), dqkvg = poisoned(qkv.shape(), t, gpu);
    attention_backward(dout, qkv, out, lse, dqkv, heads);
    attention_backward(dout.to(gpu), qkv.to(gpu), out.to(gpu), lse.to(gpu), dqkvg, heads);
    check_twin("attention dqkv", dqkv, dqkvg);
  }
}

BOOST_AUTO_TEST_CASE(embedding_twin) {
  std::mt19937 gen(35);
  for (DType t : kDTypes) {
    Tensor ids = Tensor::from_doubles({4, 1, 1, 0, 6, 1, 2, 4, 4}, DType::i64, Device::cpu(), {3, 3});
    Tensor wte = rnd({7, 5}, t, gen), wpe = rnd({4, 5}, t, gen), dout = rnd({3, 3, 5}, t, gen);
    Tensor out = poisoned({3, 3, 5}, t, Device::cpu()), outg = poisoned({3, 3, 5}, t, gpu);
    Tensor wpeg = wpe.to(gpu);
    embedding_forward(ids, wte, &wpe, out);
    embedding_forward(ids.to(gpu), wte.to(gpu), &wpeg, outg);
    check_twin("embedding out", out, outg);
    Tensor dwte = poisoned({7, 5}, t, Device::cpu()), dwpe = poisoned({4, 5}, t, Device::cpu());
    Tensor dwteg = poisoned({7, 5}, t, gpu), dwpeg = poisoned({4, 5}, t, gpu);
    embedding_backward(ids, dout, dwte, &dwpe, false);
    embedding_backward(ids.to(gpu), dout.to(gpu), dwteg, &dwpeg, false);
    check_twin("embedding dwte", dwte, dwteg);
    check_twin("embedding dwpe", dwpe, dwpeg);
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_twin) {
  std::mt19937 gen(36);
  for (DType t : kDTypes) {
    const std::int64_t rows = 9, vocab = 1031;
    Tensor logits = rnd({rows, vocab}, t, gen);
    Tensor targets = Tensor::from_doubles({0, 1030, -1, 5, 7, 512, -1, 3, 9}, DType::i32);
    auto run = [&](Device d) {
      Tensor losses = poisoned({rows}, DType::f32, d), lse = poisoned({rows}, DType::f32, d);
      Tensor loss = poisoned({1}, DType::f32, d), dlogits = poisoned({rows, vocab}, t, d);
      Tensor l = logits.to(d), tg = targets.to(d);
      cross_entropy_forward(l, tg, 7.0, losses, lse, loss);
      cross_entropy_backward(l, tg, lse, 1.5, 7.0, dlogits);
      return std::make_pair(loss, dlogits);
    };
    auto [loss, dlogits] = run(Device::cpu());
    auto [lossg, dlogitsg] = run(gpu);
    check_twin("cross-entropy loss", loss, lossg);
    check_twin("cross-entropy dlogits", dlogits, dlogitsg);
  }
}

BOOST_AUTO_TEST_SUITE_END()
