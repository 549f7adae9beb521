// The host side of the fast CUDA kernels (Note [Fast kernels and their simple
// references]): ZRT_SIMPLE_KERNELS's parsing and the thread-local override,
// the order of Note [Deterministic block sums] emulated on the host against a
// long double sum (relative tolerance 1e-6 of Σ|term| for floats, 1e-14 for
// doubles; the cross-entropy mean in that order within 1e-6 of exact and
// 2e-5 of the CPU twin's row-order sum), and the LayerNorm parameter tiles
// covering every row once; the tiled attention (Note [Tiled causal
// attention]) emulated on the host, its tile functions run on one thread in
// the kernels' block order, against the CPU twin: out, lse and dqkv within
// 1e-5 (f32) or 1e-12 (f64) of 1 + max |twin|, 1e-2 for bf16 inputs, at odd
// T, T not a multiple of the tiles, T under one tile, head dims 16 to 64.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/nn/attention.h"
#include "zrt/kernels/nn/attention_tiles_math.h"
#include "zrt/kernels/nn/block_sum_math.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/layernorm_math.h"
#include "zrt/kernels/nn/nn_checks.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

unsigned bits(FastKernel k) { return unsigned(k); }

unsigned fresh_seed() {
  const unsigned seed = std::random_device{}();
  std::cout << "test_fast_kernels seed " << seed << "\n";
  return seed;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fast_kernels)

BOOST_AUTO_TEST_CASE(parse_simple_kernels_names) {
  BOOST_TEST(parse_simple_kernels(nullptr) == 0u);
  BOOST_TEST(parse_simple_kernels("") == 0u);
  BOOST_TEST(parse_simple_kernels("cross_entropy") == bits(FastKernel::cross_entropy));
  BOOST_TEST(parse_simple_kernels("layernorm, elementwise") ==
             (bits(FastKernel::layernorm) | bits(FastKernel::elementwise)));
  BOOST_TEST(parse_simple_kernels(",layernorm,,") == bits(FastKernel::layernorm));
  // A name that is no kernel (names are case-sensitive) is refused, naming it.
  for (const char* bad : {"bogus,layernorm", "Layernorm", "junk"})
    BOOST_CHECK_EXCEPTION(
        parse_simple_kernels(bad), InvalidArgument, [&](const InvalidArgument& e) {
          const std::string w = e.what();
          return w.find(std::string("ZRT_SIMPLE_KERNELS='") + bad + "'") != std::string::npos &&
                 w.find("gemm_epilogue or all") != std::string::npos;
        });
  BOOST_TEST(parse_simple_kernels("attention") == bits(FastKernel::attention));
  BOOST_TEST(parse_simple_kernels("embedding_backward") == bits(FastKernel::embedding_backward));
  const unsigned all = parse_simple_kernels("all");
  for (FastKernel k : {FastKernel::cross_entropy, FastKernel::layernorm, FastKernel::elementwise,
                       FastKernel::attention, FastKernel::embedding_backward})
    BOOST_TEST((all & bits(k)) != 0u);
}

BOOST_AUTO_TEST_CASE(scoped_override_is_per_thread_and_nests) {
  {
    ScopedSimpleKernels outer(bits(FastKernel::layernorm));
    BOOST_TEST(simple_kernel(FastKernel::layernorm));
    BOOST_TEST(!simple_kernel(FastKernel::cross_entropy));
    {
      ScopedSimpleKernels inner(~0u);
      BOOST_TEST(simple_kernel(FastKernel::cross_entropy));
      BOOST_TEST(simple_kernel(FastKernel::elementwise));
    }
    BOOST_TEST(!simple_kernel(FastKernel::cross_entropy));
    // Another thread sees ZRT_SIMPLE_KERNELS, not this thread's override.
    bool other = false;
    std::thread([&] { other = simple_kernel(FastKernel::layernorm); }).join();
    const bool env = (parse_simple_kernels(std::getenv("ZRT_SIMPLE_KERNELS")) &
                      bits(FastKernel::layernorm)) != 0;
    BOOST_TEST(other == env);
  }
  {
    ScopedSimpleKernels none(0);
    BOOST_TEST(!simple_kernel(FastKernel::layernorm));
  }
}

BOOST_AUTO_TEST_CASE(block_sum_chunks_cover_the_terms) {
  for (std::int64_t n : {0, 1, 255, 2048, 2049, 20011, 524288, 524289, 524545, 3000017}) {
    const std::int64_t chunks = block_sum_chunks(n), len = block_sum_chunk_len(n);
    BOOST_TEST_CONTEXT("n " << n) {
      BOOST_TEST(chunks >= 1);
      BOOST_TEST(chunks <= kBlockSumMaxChunks);
      BOOST_TEST(chunks * len >= n);
      if (n > 0) BOOST_TEST((chunks - 1) * len < n);  // no block is left without terms
    }
  }
}

BOOST_AUTO_TEST_CASE(block_tree_sum_matches_a_long_double_sum) {
  std::mt19937 gen(fresh_seed());
  std::uniform_real_distribution<double> dist(-3, 5);
  for (std::int64_t n : {1, 31, 257, 2047, 2049, 20011, 600001}) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = dist(gen);
    long double exact = 0, abs_sum = 0;
    for (double x : v) {
      exact += static_cast<float>(x);
      abs_sum += std::abs(static_cast<float>(x));
    }
    const float f =
        block_tree_sum<float>(n, [&](std::int64_t i) { return static_cast<float>(v[i]); });
    const double d =
        block_tree_sum<double>(n, [&](std::int64_t i) { return double(static_cast<float>(v[i])); });
    BOOST_TEST_CONTEXT("n " << n) {
      BOOST_TEST(std::abs(static_cast<long double>(f) - exact) <= 1e-6L * abs_sum);
      BOOST_TEST(std::abs(static_cast<long double>(d) - exact) <= 1e-14L * abs_sum);
    }
  }
  // A term at every position counts once: Σ 1 is exact.
  for (std::int64_t n : {1, 300, 4099, 524289})
    BOOST_TEST(block_tree_sum<double>(n, [](std::int64_t) { return 1.0; }) == double(n));
  // Σ i with distinct powers of two would expose a term added twice or lost.
  BOOST_TEST(block_tree_sum<double>(40, [](std::int64_t i) { return std::ldexp(1.0, int(i)); }) ==
             std::ldexp(1.0, 40) - 1);
}

BOOST_AUTO_TEST_CASE(cross_entropy_mean_in_block_order_matches_the_twin) {
  // The CPU twin's loss (rows in order) and the fast CUDA order over the same
  // per-row losses agree to 1e-6 relative.
  std::mt19937 gen(fresh_seed());
  std::uniform_real_distribution<double> dist(-2, 2);
  const std::int64_t rows = 4099, vocab = 13;
  std::vector<double> lv(static_cast<std::size_t>(rows * vocab)),
      tv(static_cast<std::size_t>(rows));
  for (auto& x : lv) x = dist(gen);
  for (std::int64_t r = 0; r < rows; ++r) tv[r] = r % 7 == 3 ? -1 : double((r * 5) % vocab);
  Tensor logits = Tensor::from_doubles(lv, DType::f32, Device::cpu(), {rows, vocab});
  Tensor targets = Tensor::from_doubles(tv, DType::i64);
  Tensor losses = Tensor::empty({rows}, DType::f32), lse = Tensor::empty({rows}, DType::f32);
  Tensor loss = Tensor::empty({1}, DType::f32);
  cross_entropy_forward(logits, targets, 3000.0, losses, lse, loss);
  const float* pl = losses.data<float>();
  const float fast = block_tree_sum<float>(rows, [&](std::int64_t r) { return pl[r]; }) / 3000.0f;
  long double exact = 0;
  for (std::int64_t r = 0; r < rows; ++r) exact += pl[r];
  exact /= 3000.0L;
  const double twin = loss.to_doubles()[0];
  // The block order is within 1e-6 of the exact sum; the twin's row-order
  // float sum drifts further (about sqrt(rows)·ε), so the two agree to 2e-5.
  BOOST_TEST(std::abs(static_cast<long double>(fast) - exact) <= 1e-6L * std::abs(exact));
  BOOST_TEST(std::abs(fast - twin) <= 2e-5 * std::abs(twin));
}

BOOST_AUTO_TEST_CASE(layernorm_param_tiles_cover_the_rows) {
  for (std::int64_t rows : {1, 7, 63, 64, 65, 1237, 8192, 8193, 100003}) {
    const std::int64_t tiles = layernorm_param_tiles(rows), len = layernorm_param_tile_len(rows);
    BOOST_TEST_CONTEXT("rows " << rows) {
      BOOST_TEST(tiles >= 1);
      BOOST_TEST(tiles <= kLayerNormMaxTiles);
      BOOST_TEST(tiles * len >= rows);
      BOOST_TEST((tiles - 1) * len < rows);
    }
  }
}

BOOST_AUTO_TEST_CASE(attention_tiles_cover_the_causal_triangle) {
  // Query tile qt visits key tile kt (kt < attention_kv_tiles_of) exactly when
  // some row of qt sees some key of kt, and the backward's key/value blocks
  // start at the first such query tile.
  for (std::int64_t seq : {1, 5, 31, 32, 33, 64, 97, 200}) {
    const std::int64_t nq = attention_tiles(seq, kAttnBr), nk = attention_tiles(seq, kAttnBc);
    for (std::int64_t qt = 0; qt < nq; ++qt) {
      for (std::int64_t kt = 0; kt < nk; ++kt) {
        bool any = false;
        for (std::int64_t q = qt * kAttnBr; q < std::min(seq, (qt + 1) * kAttnBr); ++q)
          for (std::int64_t k = kt * kAttnBc; k < std::min(seq, (kt + 1) * kAttnBc); ++k)
            any = any || attention_visible(q, k, seq);
        BOOST_TEST_CONTEXT("seq " << seq << " qt " << qt << " kt " << kt) {
          BOOST_TEST((kt < attention_kv_tiles_of(seq, qt)) == any);
          BOOST_TEST((qt >= attention_first_query_tile(kt)) == any);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(attention_online_softmax_update) {
  // Two tiles in turn give the max, sum and rescaled probabilities of one
  // softmax over both; a row with nothing visible stays empty.
  const float ninf = attention_neg_inf<float>();
  float t1[4] = {0.5f, -1.0f, ninf, 2.0f}, t2[4] = {3.0f, ninf, ninf, -0.25f};
  const float all[8] = {0.5f, -1.0f, ninf, 2.0f, 3.0f, ninf, ninf, -0.25f};
  float m = ninf, l = 0, alpha = -7;
  attention_online_softmax(t1, 4, m, l, alpha);
  BOOST_TEST(alpha == 0.0f);
  BOOST_TEST(m == 2.0f);
  attention_online_softmax(t2, 4, m, l, alpha);
  BOOST_TEST(m == 3.0f);
  BOOST_TEST(std::abs(alpha - std::exp(-1.0f)) <= 1e-7f);
  double exact = 0;
  for (float s : all)
    if (s != ninf) exact += std::exp(double(s) - 3.0);
  BOOST_TEST(std::abs(l - exact) <= 1e-6 * exact);
  BOOST_TEST(std::abs(t2[3] - std::exp(-3.25f)) <= 1e-7f);
  BOOST_TEST(t2[1] == 0.0f);
  float none[3] = {ninf, ninf, ninf}, m0 = ninf, l0 = 0, a0 = -7;
  attention_online_softmax(none, 3, m0, l0, a0);
  BOOST_TEST(m0 == ninf);
  BOOST_TEST(l0 == 0.0f);
  BOOST_TEST(a0 == 1.0f);
  BOOST_TEST(none[0] == 0.0f);
}

namespace {

// The tiled host emulation against the CPU twin for one shape and dtype.
template <class T>
void check_tiled_attention(std::int64_t batch, std::int64_t seq, std::int64_t c, std::int64_t heads,
                           std::mt19937& gen) {
  using A = acc_t<T>;
  const DType t = dtype_of<T>(), at = acc_dtype(t);
  const double tol = t == DType::f64 ? 1e-12 : t == DType::f32 ? 1e-5 : 1e-2;
  std::uniform_real_distribution<double> dist(-2, 2);
  auto rnd = [&](std::int64_t n) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = dist(gen);
    return v;
  };
  const AttentionDims d{batch, seq, c, heads, c / heads};
  Tensor qkv =
      Tensor::from_doubles(rnd(batch * seq * 3 * c), t, Device::cpu(), {batch, seq, 3 * c});
  Tensor dout = Tensor::from_doubles(rnd(batch * seq * c), t, Device::cpu(), {batch, seq, c});
  Tensor out = Tensor::full({batch, seq, c}, NAN, t),
         lse = Tensor::full({batch, heads, seq}, NAN, at);
  attention_forward(qkv, out, lse, heads);
  Tensor tout = Tensor::full({batch, seq, c}, NAN, t),
         tlse = Tensor::full({batch, heads, seq}, NAN, at);
  attention_forward_tiled_host<T, A>(d, qkv.data<T>(), tout.data<T>(), tlse.data<A>());
  zrt::test::check_close("out", out.to_doubles(), tout.to_doubles(), tol);
  zrt::test::check_close("lse", lse.to_doubles(), tlse.to_doubles(), tol);
  // The backward from the twin's out and lse, so it is checked on its own.
  Tensor dqkv = Tensor::full(qkv.shape(), NAN, t), tdqkv = Tensor::full(qkv.shape(), NAN, t);
  attention_backward(dout, qkv, out, lse, dqkv, heads);
  attention_backward_tiled_host<T, A>(d, dout.data<T>(), qkv.data<T>(), out.data<T>(),
                                      lse.data<A>(), tdqkv.data<T>());
  zrt::test::check_close("dqkv", dqkv.to_doubles(), tdqkv.to_doubles(), tol);
}

}  // namespace

BOOST_AUTO_TEST_CASE(tiled_attention_emulation_matches_the_twin) {
  std::mt19937 gen(fresh_seed());
  struct Shape4 {
    std::int64_t batch, seq, c, heads;
  };
  // Head dims 16, 32, 64; T under a tile, odd, a tile multiple, past tiles.
  for (const Shape4& s :
       {Shape4{1, 1, 16, 1}, Shape4{2, 7, 32, 2}, Shape4{1, 31, 64, 2}, Shape4{2, 32, 48, 3},
        Shape4{1, 33, 64, 1}, Shape4{3, 65, 96, 3}, Shape4{1, 97, 128, 2}, Shape4{2, 64, 64, 4}}) {
    BOOST_TEST_CONTEXT("B " << s.batch << " T " << s.seq << " C " << s.c << " H " << s.heads) {
      BOOST_TEST_CONTEXT("f32") { check_tiled_attention<float>(s.batch, s.seq, s.c, s.heads, gen); }
      BOOST_TEST_CONTEXT("f64") {
        check_tiled_attention<double>(s.batch, s.seq, s.c, s.heads, gen);
      }
      BOOST_TEST_CONTEXT("bf16") { check_tiled_attention<bf16>(s.batch, s.seq, s.c, s.heads, gen); }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
