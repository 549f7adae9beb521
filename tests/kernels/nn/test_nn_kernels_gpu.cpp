// What the registered ops' harness (Note [One registration per op];
// test_op_registry_gpu runs every model-zoo CUDA kernel against its CPU twin
// and its simple reference) cannot express: the fast cross-entropy mean
// equal bit for bit to the host emulation of its block order (Note
// [Deterministic block sums]) and the simple mean to the row-order sum;
// TF32 as an opt-in (Note [TF32 GEMMs]), off by default, f32 GEMMs within
// 1e-2 with it on and 1e-4 off; and the device id checks (Note [Device id
// checks]): flags set by bad ids, nothing read or written out of bounds,
// good ids unchanged by a flag. Outputs are poisoned first; random inputs'
// seeds are printed.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <iostream>
#include <random>

#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/nn/block_sum_math.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/embedding.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/gemm_epilogue.h"
#include "zrt/kernels/nn/id_check.h"

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

void check_close(const std::string& what, const Tensor& cpu, const Tensor& dev, double tol) {
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
  BOOST_TEST((std::isfinite(scale) && err <= tol * scale),
             what << " " << dtype_name(cpu.dtype()) << ": max |gpu - cpu| " << err);
}

void check_twin(const std::string& what, const Tensor& cpu, const Tensor& dev) {
  check_close(what, cpu, dev, cpu.dtype() == DType::f32 || cpu.dtype() == DType::f64 ? 1e-4 : 1e-2);
}

const unsigned kSimpleAll = ~0u;

unsigned fresh_seed(const char* what) {
  const unsigned seed = std::random_device{}();
  std::cout << what << " seed " << seed << "\n";
  return seed;
}

// Bit-for-bit equality of two tensors' values (NaN never equal).
bool same_bits(const Tensor& a, const Tensor& b) {
  const auto x = a.to(Device::cpu()).to_doubles(), y = b.to(Device::cpu()).to_doubles();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i])) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(nn_kernels_gpu)

BOOST_AUTO_TEST_CASE(cross_entropy_fast_mean) {
  // The fast mean equals the host emulation of its order over the kernel's own
  // per-row losses bit for bit, and the simple mean the row-order sum (the
  // harness compares both with the CPU twin). 20011 rows span several blocks.
  std::mt19937 gen(fresh_seed("cross_entropy_fast_mean"));
  for (const std::int64_t rows : {std::int64_t(1), std::int64_t(333), std::int64_t(20011)}) {
    const std::int64_t vocab = 67;
    Tensor logits = rnd({rows, vocab}, DType::f32, gen);
    std::vector<double> tv(static_cast<std::size_t>(rows));
    std::uniform_int_distribution<int> pick(-1, int(vocab) - 1);
    for (auto& t : tv) t = pick(gen);
    Tensor targets = Tensor::from_doubles(tv, DType::i32);
    auto run = [&](Device d, unsigned simple) {
      ScopedSimpleKernels path(simple);
      Tensor losses = poisoned({rows}, DType::f32, d), lse = poisoned({rows}, DType::f32, d);
      Tensor loss = poisoned({1}, DType::f32, d);
      cross_entropy_forward(logits.to(d), targets.to(d), 1234.0, losses, lse, loss);
      return std::make_pair(losses.to(Device::cpu()), loss.to(Device::cpu()));
    };
    auto [losses_fast, fast] = run(gpu, 0);
    auto [losses_simple, simple] = run(gpu, kSimpleAll);
    BOOST_TEST_CONTEXT("rows " << rows) {
      const float* pl = losses_fast.data<float>();
      const float emulated =
          block_tree_sum<float>(rows, [&](std::int64_t r) { return pl[r]; }) / 1234.0f;
      BOOST_TEST(fast.to_doubles()[0] == double(emulated));
      float in_order = 0;
      for (std::int64_t r = 0; r < rows; ++r) in_order += pl[r];
      BOOST_TEST(simple.to_doubles()[0] == double(in_order / 1234.0f));
    }
  }
}

BOOST_AUTO_TEST_CASE(tf32_is_an_opt_in_within_its_tolerance) {
  std::mt19937 gen(fresh_seed("tf32_is_an_opt_in_within_its_tolerance"));
  const std::int64_t m = 96, n = 136, k = 300;
  Tensor a = rnd({m, k}, DType::f32, gen), w = rnd({n, k}, DType::f32, gen),
         b = rnd({n}, DType::f32, gen);
  Tensor ones = Tensor::full({m}, 1.0, DType::f32);
  Tensor c_c = poisoned({m, n}, DType::f32, Device::cpu()),
         y_c = poisoned({m, n}, DType::f32, Device::cpu());
  gemm(a, false, w, true, c_c);
  gemm_bias(a, w, true, b, ones, y_c);
  const Tensor ag = a.to(gpu), wg = w.to(gpu), bg = b.to(gpu), og = ones.to(gpu);
  for (bool tf32 : {false, true}) {
    ScopedTf32Gemms mode(tf32);
    const double tol = tf32 ? 1e-2 : 1e-4;
    const std::string how = tf32 ? " tf32" : " fp32";
    for (unsigned simple : {kSimpleAll, 0u}) {
      ScopedSimpleKernels path(simple);
      Tensor c = poisoned({m, n}, DType::f32, gpu), y = poisoned({m, n}, DType::f32, gpu);
      gemm(ag, false, wg, true, c);
      gemm_bias(ag, wg, true, bg, og, y);
      check_close("gemm" + how, c_c, c, tol);
      check_close(std::string("gemm_bias") + (simple ? " simple" : " epilogue") + how, y_c, y, tol);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

// Note [Device id checks]: with a flag, bad ids set it (count, the smallest
// position and its id, the kinds) and neither crash nor touch what they must
// not: a bad id's output row is wpe alone, its position adds to no dwte row
// (rows of tokens that do not occur keep their accumulated values bit for
// bit), a bad target's row is ignored. Good ids with a flag give the same
// bits as without one. Out-of-bounds accesses are for compute-sanitizer.
BOOST_AUTO_TEST_CASE(device_id_checks) {
  std::mt19937 gen(fresh_seed("device_id_checks"));
  const std::int64_t batch = 2, seq = 5, vocab = 9, channels = 6;
  Tensor wte = rnd({vocab, channels}, DType::f32, gen), wpe = rnd({seq, channels}, DType::f32, gen);
  Tensor dout = rnd({batch, seq, channels}, DType::f32, gen);
  Tensor good =
      Tensor::from_doubles({1, 2, 2, 8, 0, 3, 1, 1, 4, 5}, DType::i32, Device::cpu(), {batch, seq});
  // Bad at positions 3 (9 = V), 6 (-2) and 8 (1 << 20); token 7 and 6 never occur.
  Tensor bad = Tensor::from_doubles({1, 2, 2, 9, 0, 3, -2, 1, 1 << 20, 5}, DType::i32,
                                    Device::cpu(), {batch, seq});
  Tensor wteg = wte.to(gpu), wpeg = wpe.to(gpu), doutg = dout.to(gpu);
  for (const unsigned simple : {0u, kSimpleAll}) {
    BOOST_TEST_CONTEXT("simple " << simple) {
      ScopedSimpleKernels path(simple);
      // Good ids: the flag stays zero and changes no bit.
      {
        Tensor flag = new_id_flag(gpu);
        Tensor o0 = poisoned({batch, seq, channels}, DType::f32, gpu),
               o1 = poisoned({batch, seq, channels}, DType::f32, gpu);
        embedding_forward(good.to(gpu), wteg, &wpeg, o0);
        embedding_forward(good.to(gpu), wteg, &wpeg, o1, {}, &flag);
        BOOST_TEST(same_bits(o0, o1));
        Tensor g0 = poisoned({vocab, channels}, DType::f32, gpu),
               g1 = poisoned({vocab, channels}, DType::f32, gpu);
        embedding_backward(good.to(gpu), doutg, g0, nullptr, false);
        embedding_backward(good.to(gpu), doutg, g1, nullptr, false, {}, &flag);
        BOOST_TEST(same_bits(g0, g1));
        BOOST_TEST(flag.to(Device::cpu()).to_doubles() == std::vector<double>(kIdFlagWords, 0.0));
      }
      Tensor flag = new_id_flag(gpu);
      Tensor out = poisoned({batch, seq, channels}, DType::f32, gpu);
      embedding_forward(bad.to(gpu), wteg, &wpeg, out, {}, &flag);
      const Tensor outh = out.to(Device::cpu());
      for (const std::int64_t p : {3, 6, 8}) {
        for (std::int64_t ch = 0; ch < channels; ++ch)
          BOOST_TEST(outh.data<float>()[p * channels + ch] ==
                     wpe.data<float>()[(p % seq) * channels + ch]);
      }
      Tensor acc = rnd({vocab, channels}, DType::f32, gen);
      Tensor dwte = acc.to(gpu);
      embedding_backward(bad.to(gpu), doutg, dwte, nullptr, true, {}, &flag);
      const Tensor dh = dwte.to(Device::cpu());
      for (const std::int64_t v : {6, 7, 8}) {
        for (std::int64_t ch = 0; ch < channels; ++ch)
          BOOST_TEST(dh.data<float>()[v * channels + ch] == acc.data<float>()[v * channels + ch]);
      }
      // The good positions match the CPU twin on the good ids alone.
      Tensor masked = Tensor::from_doubles({1, 2, 2, 0, 0, 3, 0, 1, 0, 5}, DType::i32,
                                           Device::cpu(), {batch, seq});
      Tensor dmask = dout.clone();
      for (const std::int64_t p : {3, 6, 8})
        for (std::int64_t ch = 0; ch < channels; ++ch)
          dmask.data<float>()[p * channels + ch] = 0.0f;
      Tensor ref = acc.clone();
      embedding_backward(masked, dmask, ref, nullptr, true);
      check_twin("embedding dwte with bad ids", ref, dh);
      const BadIds b = decode_id_flag(flag.to(Device::cpu()).data<std::int64_t>());
      BOOST_TEST(b.count == 6);  // 3 in the forward, 3 in the backward
      BOOST_TEST(b.position == 3);
      BOOST_TEST(b.id == 9);
      BOOST_TEST(b.sources == unsigned(IdSource::token));
      BOOST_CHECK_THROW(throw_if_bad_ids(flag.to(Device::cpu()), vocab), InvalidArgument);
      // Cross-entropy: target V at row 2 and 1000 at row 4 are ignored and recorded.
      const std::int64_t rows = 6, cv = 37;
      Tensor logits = rnd({rows, cv}, DType::f32, gen).to(gpu);
      Tensor tflag = new_id_flag(gpu);
      Tensor tg = Tensor::from_doubles({0, 36, 37, -1, 1000, 5}, DType::i32).to(gpu);
      Tensor tr = Tensor::from_doubles({0, 36, -1, -1, -1, 5}, DType::i32).to(gpu);
      auto ce = [&](const Tensor& targets, const Tensor* f) {
        Tensor losses = poisoned({rows}, DType::f32, gpu), lse = poisoned({rows}, DType::f32, gpu);
        Tensor loss = poisoned({1}, DType::f32, gpu), dl = poisoned({rows, cv}, DType::f32, gpu);
        cross_entropy_forward(logits, targets, 3.0, losses, lse, loss, {}, f);
        cross_entropy_backward(logits, targets, lse, 1.0, 3.0, dl, {}, f);
        return std::make_pair(loss.to(Device::cpu()), dl.to(Device::cpu()));
      };
      auto [lb, db] = ce(tg, &tflag);
      auto [lr, dr] = ce(tr, nullptr);
      BOOST_TEST(same_bits(lb, lr));
      BOOST_TEST(same_bits(db, dr));
      const BadIds tb = decode_id_flag(tflag.to(Device::cpu()).data<std::int64_t>());
      BOOST_TEST(tb.count == 4);  // 2 in the forward, 2 in the backward
      BOOST_TEST(tb.position == 2);
      BOOST_TEST(tb.id == 37);
      BOOST_TEST(tb.sources == unsigned(IdSource::target));
    }
  }
}
