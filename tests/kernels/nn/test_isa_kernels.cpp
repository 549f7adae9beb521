// Every instruction-set copy of the CPU kernels this machine runs
// (Note [Kernels per instruction set]) against float64 references:
//  - blocked attention (Note [Blocked CPU attention]) against the per-row
//    arithmetic the CUDA kernels run (attention_math.h) evaluated in double,
//    forward (out, lse) and backward (dqkv), at sequence lengths below, at and
//    across the query block, odd head dims and heads;
//  - GEMM with leading dimensions wider than the rows, every transpose pair;
//  - GELU forward and backward against the shared formula in double.
// f64 copies within 1e-11, f32 within 2e-5, relative to 1 + max |reference|.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/nn/attention_reference.h"
#include "zrt/kernels/cpu_isa/isa_kernels.h"
#include "zrt/kernels/nn/activation_math.h"
#include "zrt/kernels/nn/attention_math.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

std::vector<const IsaKernels*> available_copies() {
  std::vector<const IsaKernels*> copies;
  for (CpuIsa isa : {CpuIsa::baseline, CpuIsa::avx2, CpuIsa::avx512})
    if (const IsaKernels* k = isa_kernels_for(isa)) copies.push_back(k);
  BOOST_TEST_MESSAGE(copies.size()
                     << " instruction-set copies run here; chosen: " << isa_kernels().name);
  return copies;
}

std::vector<double> normal_values(std::size_t n, std::mt19937_64& gen) {
  std::normal_distribution<double> dist(0, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
double max_error(const std::vector<T>& got, const std::vector<double>& ref) {
  double err = 0, scale = 1;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - ref[i]));
    scale = std::max(scale, 1 + std::abs(ref[i]));
  }
  return err / scale;
}

template <class T>
double tolerance() {
  return sizeof(T) == 8 ? 1e-11 : 2e-5;
}

template <class T>
void check_attention(const IsaKernels& copy, const AttentionDims& d, std::mt19937_64& gen) {
  const std::size_t n_qkv = d.batch * d.seq * 3 * d.channels, n_out = d.batch * d.seq * d.channels,
                    n_lse = d.batch * d.heads * d.seq;
  const auto qkv = normal_values(n_qkv, gen), dout = normal_values(n_out, gen);
  // Reference: the CUDA kernels' rows, in double.
  const test::AttentionReference ref = test::attention_reference(d, qkv, dout);

  const auto qkv_t = as<T>(qkv), dout_t = as<T>(dout);
  std::vector<T> out_t(n_out, T(NAN)), lse_t(n_lse, T(NAN)), dqkv_t(n_qkv, T(NAN));
  const std::int64_t pairs = d.batch * d.heads;
  // Two ranges, as threads would split the pairs.
  for (auto [lo, hi] : {std::pair<std::int64_t, std::int64_t>{0, pairs / 2}, {pairs / 2, pairs}}) {
    copy.table<T>().attention_forward(
        {d, lo, hi, qkv_t.data(), out_t.data(), lse_t.data(), nullptr, nullptr});
  }
  copy.table<T>().attention_backward(
      {d, 0, pairs, qkv_t.data(), out_t.data(), lse_t.data(), dout_t.data(), dqkv_t.data()});
  const std::string what = std::string(copy.name) + (sizeof(T) == 8 ? " f64" : " f32") +
                           " B=" + std::to_string(d.batch) + " T=" + std::to_string(d.seq) +
                           " C=" + std::to_string(d.channels) + " H=" + std::to_string(d.heads);
  BOOST_TEST(max_error(out_t, ref.out) <= tolerance<T>(), what << " out");
  BOOST_TEST(max_error(lse_t, ref.lse) <= tolerance<T>(), what << " lse");
  BOOST_TEST(max_error(dqkv_t, ref.dqkv) <= tolerance<T>(), what << " dqkv");
}

}  // namespace

BOOST_AUTO_TEST_CASE(blocked_attention_matches_the_row_kernels) {
  auto gen = test::fresh_generator();
  const AttentionDims shapes[] = {{2, 1, 6, 3, 2},
                                  {1, 5, 6, 2, 3},
                                  {2, kAttentionQueryBlock, 10, 2, 5},
                                  {1, kAttentionQueryBlock + 1, 21, 3, 7},
                                  {2, 2 * kAttentionQueryBlock + 13, 12, 4, 3}};
  for (const IsaKernels* copy : available_copies()) {
    for (const AttentionDims& d : shapes) {
      check_attention<float>(*copy, d, gen);
      check_attention<double>(*copy, d, gen);
    }
  }
}

BOOST_AUTO_TEST_CASE(gemm_with_leading_dimensions_matches_f64_loop) {
  auto gen = test::fresh_generator();
  const std::int64_t sizes[][3] = {{1, 1, 1}, {9, 31, 5}, {37, 3, 70}, {5, 4, 0}};
  for (const IsaKernels* copy : available_copies()) {
    for (auto [m, n, k] : sizes) {
      for (int ta = 0; ta < 2; ++ta) {
        for (int tb = 0; tb < 2; ++tb) {
          // Stored operands with 3 spare columns: lda/ldb/ldc exceed the rows.
          const std::int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, lda = a_cols + 3;
          const std::int64_t b_rows = tb ? n : k, b_cols = tb ? k : n, ldb = b_cols + 3;
          const std::int64_t ldc = n + 3;
          const auto a = normal_values(a_rows * lda, gen), b = normal_values(b_rows * ldb, gen);
          const auto c0 = normal_values(m * ldc, gen);
          const double alpha = 0.75, beta = -0.5;
          const std::vector<double> ref =
              zrt::test::reference_gemm(m, n, k, a, lda, ta, b, ldb, tb, c0, ldc, alpha, beta);
          auto c32 = as<float>(c0);
          const auto a32 = as<float>(a), b32 = as<float>(b);
          copy->f32.gemm({bool(ta), bool(tb), m, n, k, float(alpha), a32.data(), lda, b32.data(),
                          ldb, float(beta), c32.data(), ldc});
          auto c64 = c0;
          copy->f64.gemm({bool(ta), bool(tb), m, n, k, alpha, a.data(), lda, b.data(), ldb, beta,
                          c64.data(), ldc});
          BOOST_TEST(max_error(c32, ref) <= 2e-5, copy->name << " f32 " << m << "x" << n << "x" << k
                                                             << " ta=" << ta << " tb=" << tb);
          BOOST_TEST(max_error(c64, ref) <= 1e-11, copy->name << " f64 " << m << "x" << n << "x"
                                                              << k << " ta=" << ta << " tb=" << tb);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(gelu_matches_the_shared_formula) {
  auto gen = test::fresh_generator();
  const std::int64_t n = 1031;  // several chunks and a ragged tail
  auto x = normal_values(n, gen), dy = normal_values(n, gen);
  for (double big : {-12.0, 12.0, 0.0}) x.push_back(big), dy.push_back(1);
  std::vector<double> y(x.size()), dx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    y[i] = gelu_forward(x[i]);
    dx[i] = gelu_backward(x[i], dy[i]);
  }
  const std::int64_t len = std::int64_t(x.size());
  for (const IsaKernels* copy : available_copies()) {
    const auto x32 = as<float>(x), dy32 = as<float>(dy);
    std::vector<float> y32(x.size()), dx32(x.size());
    copy->f32.gelu_forward(x32.data(), y32.data(), len);
    copy->f32.gelu_backward(x32.data(), dy32.data(), dx32.data(), len);
    std::vector<double> y64(x.size()), dx64(x.size());
    copy->f64.gelu_forward(x.data(), y64.data(), len);
    copy->f64.gelu_backward(x.data(), dy.data(), dx64.data(), len);
    BOOST_TEST(max_error(y32, y) <= 2e-6, copy->name << " f32 gelu forward");
    BOOST_TEST(max_error(dx32, dx) <= 2e-6, copy->name << " f32 gelu backward");
    BOOST_TEST(max_error(y64, y) <= 1e-13, copy->name << " f64 gelu forward");
    BOOST_TEST(max_error(dx64, dx) <= 1e-13, copy->name << " f64 gelu backward");
  }
}

BOOST_AUTO_TEST_CASE(the_isa_cap_picks_a_copy_at_or_below_it) {
  BOOST_TEST((isa_kernels_capped("baseline").isa == CpuIsa::baseline));
  for (const IsaKernels* copy : available_copies()) {
    BOOST_TEST(copy == isa_kernels_for(copy->isa));
    BOOST_TEST((isa_kernels_capped(copy->name).isa == copy->isa), copy->name);
  }
  BOOST_TEST((isa_kernels_capped("avx2").isa <= CpuIsa::avx2));
  BOOST_TEST((isa_kernels_capped(nullptr).isa == isa_kernels_capped("avx512").isa));
  BOOST_CHECK_EXCEPTION(isa_kernels_capped("sse9"), InvalidArgument, [](const InvalidArgument& e) {
    return std::string(e.what()).find("ZRT_CPU_ISA='sse9' is not one of") != std::string::npos;
  });
}
