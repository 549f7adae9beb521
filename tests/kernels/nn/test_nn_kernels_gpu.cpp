// Each model-zoo CUDA kernel against its CPU twin on the same inputs, with
// outputs poisoned first. Tolerance, relative to 1 + max |CPU result|: 1e-4
// for f32 (the GPU sums in a different order: warp trees, cuBLAS tiles) and
// 1e-2 for bf16 (one output rounding apart). The fast kernels (Note [Fast
// kernels and their simple references]) are also checked against their simple
// versions at the same tolerance, on fresh random inputs whose seed is
// printed, and their deterministic sums bit for bit. The tiled attention is
// checked against the simple kernels and the CPU twin for out, lse and dqkv
// at odd sizes (T under a tile, T past several tiles, head dims 16 to 64),
// and two fast runs bit for bit; so are the flash kernels (Note [Flash
// attention on tensor cores]) and the GEMM path (Note [Attention on
// GEMMs]), the latter also against the same calls on the CPU, with its strided-batched
// GEMMs (every transpose pair, bf16/f16 into f32) and causal softmax kernels
// against their twins. The GEMM epilogues (Note [GEMM epilogues])
// against the simple path and the CPU twin at the same tolerance, f32, bf16
// and f16 (f16 at 1e-2), both weight layouts, shapes the epilogue takes and
// odd ones (m, n, k not multiples of 8; GELU with n % 8 != 0 and a
// misaligned view, which take the simple path); with TF32 on (Note [TF32
// GEMMs]) f32 GEMMs within 1e-2 (TF32 keeps 10 mantissa bits to bf16's 8),
// and off by default within the f32 tolerance.
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <random>

#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/nn/activation.h"
#include "zrt/kernels/nn/attention.h"
#include "zrt/kernels/nn/attention_path.h"
#include "zrt/kernels/nn/batched_gemm.h"
#include "zrt/kernels/nn/block_sum_math.h"
#include "zrt/kernels/nn/causal_softmax.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/embedding.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/gemm_epilogue.h"
#include "zrt/kernels/nn/id_check.h"
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

const DType kDTypes[] = {DType::f32, DType::bf16};

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

BOOST_AUTO_TEST_CASE(gemm_twin) {
  std::mt19937 gen(31);
  for (DType t : kDTypes) {
    for (int tr = 0; tr < 4; ++tr) {
      const bool ta = tr & 1, tb = tr & 2;
      const std::int64_t m = 39, n = 23, k = 71;
      Tensor a = rnd(ta ? Shape{k, m} : Shape{m, k}, t, gen),
             b = rnd(tb ? Shape{n, k} : Shape{k, n}, t, gen);
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
    Tensor x = rnd({rows, c}, t, gen), w = rnd({c}, t, gen), b = rnd({c}, t, gen),
           dy = rnd({rows, c}, t, gen);
    Tensor y = poisoned({rows, c}, t, Device::cpu()),
           mean = poisoned({rows}, DType::f32, Device::cpu());
    Tensor rstd = poisoned({rows}, DType::f32, Device::cpu());
    Tensor yg = poisoned({rows, c}, t, gpu), meang = poisoned({rows}, DType::f32, gpu),
           rstdg = poisoned({rows}, DType::f32, gpu);
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
    Tensor out = poisoned({batch, seq, c}, t, Device::cpu()),
           lse = poisoned({batch, heads, seq}, DType::f32, Device::cpu());
    Tensor outg = poisoned({batch, seq, c}, t, gpu),
           lseg = poisoned({batch, heads, seq}, DType::f32, gpu);
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
    Tensor ids =
        Tensor::from_doubles({4, 1, 1, 0, 6, 1, 2, 4, 4}, DType::i64, Device::cpu(), {3, 3});
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

// The fused classifier (Note [Fused classifier]) on the GPU: its online
// max and sum against the CPU twin, in place and not, with padded columns
// (vocab 1031 of 1152) that must come back exactly 0.
BOOST_AUTO_TEST_CASE(cross_entropy_fused_twin) {
  std::mt19937 gen(fresh_seed("cross_entropy_fused_twin"));
  for (DType t : kDTypes) {
    const std::int64_t rows = 9, vocab = 1031, cols = 1152;
    Tensor logits = rnd({rows, cols}, t, gen);
    Tensor targets = Tensor::from_doubles({0, 1030, -1, 5, 7, 512, -1, 3, 9}, DType::i64);
    auto run = [&](Device d, bool in_place) {
      Tensor losses = poisoned({rows}, DType::f32, d), loss = poisoned({1}, DType::f32, d);
      Tensor l = logits.to(d);
      Tensor dlogits = in_place ? l : poisoned({rows, cols}, t, d);
      cross_entropy_fused(l, targets.to(d), vocab, 7.0, 1.5, losses, loss, dlogits);
      return std::make_pair(loss, dlogits);
    };
    auto [loss, dlogits] = run(Device::cpu(), false);
    for (const bool in_place : {false, true}) {
      BOOST_TEST_CONTEXT("in place " << in_place) {
        auto [lossg, dlogitsg] = run(gpu, in_place);
        check_twin("fused classifier loss", loss, lossg);
        check_twin("fused classifier dlogits", dlogits, dlogitsg);
        const Tensor back = dlogitsg.to(Device::cpu());
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t i = vocab; i < cols; ++i) BOOST_TEST(back.item(r * cols + i) == 0.0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_fast_mean) {
  // The fast mean equals the host emulation of its order over the kernel's own
  // per-row losses bit for bit, is bit-identical run to run, and matches the
  // simple mean (itself bit-identical to the row-order sum) and the CPU twin
  // within check_twin's tolerance. 20011 rows span several blocks.
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
    auto [losses_cpu, cpu] = run(Device::cpu(), 0);
    BOOST_TEST_CONTEXT("rows " << rows) {
      const float* pl = losses_fast.data<float>();
      const float emulated =
          block_tree_sum<float>(rows, [&](std::int64_t r) { return pl[r]; }) / 1234.0f;
      BOOST_TEST(fast.to_doubles()[0] == double(emulated));
      float in_order = 0;
      for (std::int64_t r = 0; r < rows; ++r) in_order += pl[r];
      BOOST_TEST(simple.to_doubles()[0] == double(in_order / 1234.0f));
      BOOST_TEST(same_bits(run(gpu, 0).second, fast));
      check_twin("cross-entropy fast vs simple", simple, fast);
      check_twin("cross-entropy fast vs cpu", cpu, fast);
    }
  }
}

BOOST_AUTO_TEST_CASE(layernorm_fast_param_grads) {
  // Fast two-pass parameter gradients against the simple per-feature loop and
  // the CPU twin (check_twin's tolerance), written and accumulated, at odd
  // sizes (C not a multiple of 32, rows across several tiles), and
  // bit-identical run to run.
  std::mt19937 gen(fresh_seed("layernorm_fast_param_grads"));
  for (DType t : kDTypes) {
    for (const auto& size :
         {std::pair<std::int64_t, std::int64_t>{1, 5}, {1237, 771}, {9001, 33}}) {
      const std::int64_t rows = size.first, c = size.second;
      Tensor x = rnd({rows, c}, t, gen), w = rnd({c}, t, gen), b = rnd({c}, t, gen);
      Tensor dy = rnd({rows, c}, t, gen), dw0 = rnd({c}, t, gen), db0 = rnd({c}, t, gen);
      Tensor mean = poisoned({rows}, DType::f32, Device::cpu()),
             rstd = poisoned({rows}, DType::f32, Device::cpu());
      Tensor y = poisoned({rows, c}, t, Device::cpu());
      layernorm_forward(x, w, b, y, mean, rstd);
      for (bool accumulate : {false, true}) {
        auto run = [&](Device d, unsigned simple) {
          ScopedSimpleKernels path(simple);
          Tensor dx = poisoned({rows, c}, t, d), dw = dw0.to(d), db = db0.to(d);
          layernorm_backward(dy.to(d), x.to(d), w.to(d), mean.to(d), rstd.to(d), dx, dw, db,
                             accumulate);
          return std::make_tuple(dx, dw, db);
        };
        auto [dx_f, dw_f, db_f] = run(gpu, 0);
        auto [dx_s, dw_s, db_s] = run(gpu, kSimpleAll);
        auto [dx_c, dw_c, db_c] = run(Device::cpu(), 0);
        BOOST_TEST_CONTEXT("rows " << rows << " C " << c << " accumulate " << accumulate) {
          check_twin("layernorm dw fast vs simple", dw_s.to(Device::cpu()), dw_f);
          check_twin("layernorm db fast vs simple", db_s.to(Device::cpu()), db_f);
          check_twin("layernorm dw fast vs cpu", dw_c, dw_f);
          check_twin("layernorm db fast vs cpu", db_c, db_f);
          check_twin("layernorm dx fast vs cpu", dx_c, dx_f);
          auto [dx_2, dw_2, db_2] = run(gpu, 0);
          BOOST_TEST(same_bits(dw_2, dw_f));
          BOOST_TEST(same_bits(db_2, db_f));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(elementwise_packs_and_tails) {
  // Residual add and activations in 16-byte packs against the simple
  // per-element kernels and the CPU twin (check_twin's tolerance), on aligned
  // tensors and on views one element in (not 16-byte aligned: the scalar
  // fallback), with lengths that leave a tail.
  std::mt19937 gen(fresh_seed("elementwise_packs_and_tails"));
  for (DType t : kDTypes) {
    for (std::int64_t n : {1, 7, 8, 1031, 65537}) {
      for (std::int64_t offset : {0, 1}) {
        Tensor a = rnd({n + offset}, t, gen), b = rnd({n + offset}, t, gen);
        auto view = [&](const Tensor& full) { return full.slice(offset, n); };
        BOOST_TEST_CONTEXT(dtype_name(t) << " n " << n << " offset " << offset) {
          Tensor sum_c = poisoned({n}, t, Device::cpu());
          residual_add(view(a), view(b), sum_c);
          for (Activation act : {Activation::gelu, Activation::relu}) {
            Tensor y_c = poisoned({n}, t, Device::cpu()), dx_c = poisoned({n}, t, Device::cpu());
            activation_forward(act, view(a), y_c);
            activation_backward(act, view(a), view(b), dx_c);
            for (unsigned simple : {0u, kSimpleAll}) {
              ScopedSimpleKernels path(simple);
              Tensor ag = a.to(gpu), bg = b.to(gpu);
              Tensor yg_full = poisoned({n + offset}, t, gpu),
                     dxg_full = poisoned({n + offset}, t, gpu);
              activation_forward(act, view(ag), view(yg_full));
              activation_backward(act, view(ag), view(bg), view(dxg_full));
              check_twin(simple ? "activation_forward simple" : "activation_forward packs", y_c,
                         view(yg_full));
              check_twin(simple ? "activation_backward simple" : "activation_backward packs", dx_c,
                         view(dxg_full));
            }
          }
          for (unsigned simple : {0u, kSimpleAll}) {
            ScopedSimpleKernels path(simple);
            Tensor og_full = poisoned({n + offset}, t, gpu);
            residual_add(view(a.to(gpu)), view(b.to(gpu)), view(og_full));
            check_twin(simple ? "residual_add simple" : "residual_add packs", sum_c, view(og_full));
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(attention_fast_paths_forward_and_backward) {
  // Each fast path (Note [Attention paths]) against the simple kernels and
  // the CPU twin; the GEMM path also against its own calls on the CPU.
  std::mt19937 gen(fresh_seed("attention_fast_paths_forward_and_backward"));
  struct Shape4 {
    std::int64_t batch, seq, c, heads;
  };
  for (DType t : kDTypes) {
    for (const Shape4& s :
         {Shape4{1, 1, 16, 1}, Shape4{2, 23, 24, 3}, Shape4{1, 33, 64, 2}, Shape4{2, 64, 64, 1},
          Shape4{3, 97, 96, 3}, Shape4{1, 130, 128, 2}, Shape4{2, 256, 768, 12}}) {
      const DType at = acc_dtype(t);
      Tensor qkv = rnd({s.batch, s.seq, 3 * s.c}, t, gen),
             dout = rnd({s.batch, s.seq, s.c}, t, gen);
      auto run = [&](Device d, unsigned simple, std::optional<AttentionPath> forced) {
        ScopedSimpleKernels path(simple);
        ScopedAttentionPath chosen(forced);
        Tensor out = poisoned({s.batch, s.seq, s.c}, t, d),
               lse = poisoned({s.batch, s.heads, s.seq}, at, d);
        Tensor q = qkv.to(d);
        attention_forward(q, out, lse, s.heads);
        Tensor dqkv = poisoned(qkv.shape(), t, d);
        attention_backward(dout.to(d), q, out, lse, dqkv, s.heads);
        return std::make_tuple(out.to(Device::cpu()), lse.to(Device::cpu()),
                               dqkv.to(Device::cpu()));
      };
      auto [out_s, lse_s, dqkv_s] = run(gpu, unsigned(FastKernel::attention), std::nullopt);
      auto [out_c, lse_c, dqkv_c] = run(Device::cpu(), 0, std::nullopt);
      auto [out_cg, lse_cg, dqkv_cg] = run(Device::cpu(), 0, AttentionPath::gemm);
      // flash where it has kernels (bf16, head dims 16..128); elsewhere the
      // forced path falls back to the default, which must agree too.
      for (AttentionPath p : {AttentionPath::tiled, AttentionPath::gemm, AttentionPath::flash}) {
        BOOST_TEST_CONTEXT(attention_path_name(p)
                           << " " << dtype_name(t) << " B " << s.batch << " T " << s.seq << " C "
                           << s.c << " H " << s.heads) {
          auto [out_f, lse_f, dqkv_f] = run(gpu, 0, p);
          check_twin("attention out vs simple", out_s, out_f);
          check_twin("attention lse vs simple", lse_s, lse_f);
          check_twin("attention dqkv vs simple", dqkv_s, dqkv_f);
          check_twin("attention out vs cpu", out_c, out_f);
          check_twin("attention lse vs cpu", lse_c, lse_f);
          check_twin("attention dqkv vs cpu", dqkv_c, dqkv_f);
          if (p == AttentionPath::gemm) {
            check_twin("attention out vs the cpu's gemm path", out_cg, out_f);
            check_twin("attention dqkv vs the cpu's gemm path", dqkv_cg, dqkv_f);
          }
          auto [out_2, lse_2, dqkv_2] = run(gpu, 0, p);
          BOOST_TEST(same_bits(out_2, out_f));
          BOOST_TEST(same_bits(lse_2, lse_f));
          BOOST_TEST(same_bits(dqkv_2, dqkv_f));
        }
      }
    }
  }
  // The default on CUDA at these sizes is the GEMM path.
  AttentionQuery q;
  q.cuda = true;
  q.dims = {2, 256, 768, 12, 64};
  q.dtype = DType::bf16;
  BOOST_TEST(int(choose_attention_path(q).path) == int(AttentionPath::gemm));
}

BOOST_AUTO_TEST_CASE(batched_gemm_twin) {
  // Attention's layouts: heads side by side in rows (two stride levels, one
  // cuBLAS call per batch element) and squares one after another (one call).
  std::mt19937 gen(fresh_seed("batched_gemm_twin"));
  const std::int64_t b = 3, h = 4, t_len = 37, hd = 24, c = h * hd;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (DType ct : {t, acc_dtype(t)}) {
      for (int tr = 0; tr < 4; ++tr) {
        BOOST_TEST_CONTEXT(dtype_name(t) << " -> " << dtype_name(ct) << " trans " << tr) {
          BatchedGemm g;  // [T, hd] slices · their transposes -> [T, T] squares
          g.trans_a = tr & 1, g.trans_b = tr & 2;
          g.m = t_len, g.n = t_len, g.k = hd;
          g.outer = b, g.inner = h;
          // Stored a is [T, hd] unless transposed ([hd, T]): rows of c or T.
          const std::int64_t lda = g.trans_a ? h * t_len : c, ldb = g.trans_b ? c : h * t_len;
          g.a = {lda, (g.trans_a ? hd : t_len) * lda, g.trans_a ? t_len : hd};
          g.b = {ldb, (g.trans_b ? t_len : hd) * ldb, g.trans_b ? hd : t_len};
          g.c = {t_len, h * t_len * t_len, t_len * t_len};
          g.alpha = 0.5, g.beta = 1.0;
          Tensor a = rnd({b * (g.trans_a ? hd : t_len) * lda}, t, gen);
          Tensor bb = rnd({b * (g.trans_b ? t_len : hd) * ldb}, t, gen);
          Tensor cc = rnd({b * h * t_len * t_len}, ct, gen), cg = cc.to(gpu);
          batched_gemm(a, bb, cc, g);
          batched_gemm(a.to(gpu), bb.to(gpu), cg, g);
          check_twin("batched_gemm", cc, cg);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(causal_softmax_twins) {
  std::mt19937 gen(fresh_seed("causal_softmax_twins"));
  for (DType t : kDTypes) {
    for (std::int64_t seq : {1, 31, 33, 300}) {
      BOOST_TEST_CONTEXT(dtype_name(t) << " T " << seq) {
        const DType at = acc_dtype(t);
        const std::int64_t pairs = 5;
        Tensor s = rnd({pairs, seq, seq}, at, gen), dp = rnd({pairs, seq, seq}, at, gen);
        Tensor p = poisoned({pairs, seq, seq}, t, Device::cpu()),
               lse = poisoned({pairs, seq}, at, Device::cpu());
        Tensor pg = poisoned({pairs, seq, seq}, t, gpu), lseg = poisoned({pairs, seq}, at, gpu);
        causal_softmax_forward(s, p, lse);
        causal_softmax_forward(s.to(gpu), pg, lseg);
        check_twin("causal_softmax_forward probs", p, pg);
        check_twin("causal_softmax_forward lse", lse, lseg);
        Tensor r = poisoned({pairs, seq, seq}, t, Device::cpu()),
               rg = poisoned({pairs, seq, seq}, t, gpu);
        causal_softmax_recompute(s, lse, r);
        causal_softmax_recompute(s.to(gpu), lse.to(gpu), rg);
        check_twin("causal_softmax_recompute", r, rg);
        Tensor pg_in = p.to(gpu);
        causal_softmax_backward(p, dp, p);  // in place, as the GEMM path runs it
        causal_softmax_backward(pg_in, dp.to(gpu), pg_in);
        pg = pg_in;
        check_twin("causal_softmax_backward", p, pg);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(gemm_epilogue_against_simple_and_twin) {
  std::mt19937 gen(fresh_seed("gemm_epilogue_against_simple_and_twin"));
  BOOST_TEST(tf32_gemms() == parse_tf32(std::getenv("ZRT_TF32")));  // off unless ZRT_TF32 asks
  ScopedTf32Gemms fp32(false);  // fp32 tolerances even under ZRT_TF32=1
  const std::int64_t sizes[][3] = {
      {64, 128, 256}, {37, 24, 13}, {33, 19, 45}, {1, 8, 1}, {5, 3, 0}};
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (auto [m, n, k] : sizes) {
      for (bool trans_w : {false, true}) {
        for (std::int64_t offset : {0, 1}) {  // 1: x a view one element in (misaligned)
          BOOST_TEST_CONTEXT(dtype_name(t) << " m " << m << " n " << n << " k " << k << " trans_w "
                                           << trans_w << " offset " << offset) {
            Tensor x_full = rnd({m * k + offset}, t, gen),
                   w = rnd(trans_w ? Shape{n, k} : Shape{k, n}, t, gen);
            Tensor x = x_full.slice(offset, m * k).view({m, k});
            Tensor b = rnd({n}, t, gen), ones = Tensor::full({m}, 1.0, t);
            Tensor y_c = poisoned({m, n}, t, Device::cpu()),
                   pre_c = poisoned({m, n}, t, Device::cpu());
            Tensor g_c = poisoned({m, n}, t, Device::cpu());
            gemm_bias(x, w, trans_w, b, ones, y_c);
            gemm_bias_gelu(x, w, trans_w, b, ones, pre_c, g_c);
            const Tensor xg = x_full.to(gpu).slice(offset, m * k).view({m, k}), wg = w.to(gpu);
            const Tensor bg = b.to(gpu), og = ones.to(gpu);
            Tensor y_s, g_s;
            for (unsigned simple : {kSimpleAll, 0u}) {
              ScopedSimpleKernels path(simple);
              const std::string how = simple ? " simple" : " epilogue";
              Tensor y = poisoned({m, n}, t, gpu), pre = poisoned({m, n}, t, gpu),
                     g = poisoned({m, n}, t, gpu);
              gemm_bias(xg, wg, trans_w, bg, og, y);
              gemm_bias_gelu(xg, wg, trans_w, bg, og, pre, g);
              check_twin("gemm_bias" + how, y_c, y);
              check_twin("gemm_bias_gelu pre" + how, pre_c, pre);
              check_twin("gemm_bias_gelu" + how, g_c, g);
              if (simple) {
                y_s = y, g_s = g;
              } else {
                check_twin("gemm_bias epilogue vs simple", y_s.to(Device::cpu()), y);
                check_twin("gemm_bias_gelu epilogue vs simple", g_s.to(Device::cpu()), g);
              }
            }
          }
        }
      }
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

// Note [Deterministic embedding gradient]: the device grouping (a stable
// radix sort) against the simple host grouping bit for bit (the same
// per-token order) and against the CPU twin within check_twin's tolerance;
// odd sizes, many repeats, V much larger than N, a table bigger than 2^k.
BOOST_AUTO_TEST_CASE(embedding_backward_device_groups) {
  std::mt19937 gen(fresh_seed("embedding_backward_device_groups"));
  struct Case {
    std::int64_t batch, seq, vocab, channels, distinct;
  };
  for (const Case c : {Case{1, 1, 1, 3, 1}, Case{3, 7, 5, 9, 3}, Case{2, 33, 50257, 5, 11},
                       Case{5, 129, 1000, 17, 1000}, Case{4, 61, 4097, 8, 2}}) {
    for (DType t : kDTypes) {
      for (DType it : {DType::i32, DType::i64}) {
        BOOST_TEST_CONTEXT("batch " << c.batch << " seq " << c.seq << " vocab " << c.vocab
                                    << " channels " << c.channels << " " << dtype_name(t) << " ids "
                                    << dtype_name(it)) {
          std::vector<double> iv(static_cast<std::size_t>(c.batch * c.seq));
          std::uniform_int_distribution<std::int64_t> pick(0, c.distinct - 1);
          for (auto& v : iv) v = double((pick(gen) * 7919) % c.vocab);
          Tensor ids = Tensor::from_doubles(iv, it, Device::cpu(), {c.batch, c.seq});
          Tensor dout = rnd({c.batch, c.seq, c.channels}, t, gen);
          Tensor acc0 = rnd({c.vocab, c.channels}, t, gen),
                 pacc0 = rnd({c.seq + 2, c.channels}, t, gen);
          for (const bool accumulate : {false, true}) {
            auto run = [&](Device d, unsigned simple) {
              ScopedSimpleKernels path(simple);
              Tensor dwte = accumulate ? acc0.to(d) : poisoned({c.vocab, c.channels}, t, d);
              Tensor dwpe = accumulate ? pacc0.to(d) : poisoned({c.seq + 2, c.channels}, t, d);
              embedding_backward(ids.to(d), dout.to(d), dwte, &dwpe, accumulate);
              return std::make_pair(dwte.to(Device::cpu()), dwpe.to(Device::cpu()));
            };
            auto [fast, fastp] = run(gpu, 0);
            auto [simple, simplep] = run(gpu, kSimpleAll);
            auto [cpu, cpup] = run(Device::cpu(), 0);
            BOOST_TEST(same_bits(fast, simple));
            BOOST_TEST(same_bits(fastp, simplep));
            BOOST_TEST(same_bits(run(gpu, 0).first, fast));
            check_twin("embedding dwte device groups", cpu, fast);
            check_twin("embedding dwpe device groups", cpup, fastp);
          }
        }
      }
    }
  }
}

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
