// The host side of the fast CUDA kernels (Note [Fast kernels and their simple
// references]): ZRT_SIMPLE_KERNELS's parsing and the thread-local override,
// the order of Note [Deterministic block sums] emulated on the host against a
// long double sum (relative tolerance 1e-6 of Σ|term| for floats, 1e-14 for
// doubles; the cross-entropy mean in that order within 1e-6 of exact and
// 2e-5 of the CPU twin's row-order sum), and the LayerNorm parameter tiles
// covering every row once.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/nn/block_sum_math.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/layernorm_math.h"

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
  BOOST_TEST(parse_simple_kernels("bogus,,layernorm,") == bits(FastKernel::layernorm));
  BOOST_TEST(parse_simple_kernels("Layernorm") == 0u);  // names are case-sensitive
  const unsigned all = parse_simple_kernels("all");
  for (FastKernel k : {FastKernel::cross_entropy, FastKernel::layernorm, FastKernel::elementwise})
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
    const bool env = (parse_simple_kernels(std::getenv("ZRT_SIMPLE_KERNELS")) & bits(FastKernel::layernorm)) != 0;
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
    const float f = block_tree_sum<float>(n, [&](std::int64_t i) { return static_cast<float>(v[i]); });
    const double d = block_tree_sum<double>(n, [&](std::int64_t i) { return double(static_cast<float>(v[i])); });
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
  std::vector<double> lv(static_cast<std::size_t>(rows * vocab)), tv(static_cast<std::size_t>(rows));
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

BOOST_AUTO_TEST_SUITE_END()
