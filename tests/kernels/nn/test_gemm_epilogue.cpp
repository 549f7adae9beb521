// The host side of the GEMM epilogues (Note [GEMM epilogues]) and of TF32
// (Note [TF32 GEMMs]): gemm_epilogue_fits's decision on dtype, sizes,
// alignment and GELU's aux leading dim; the alignment that keys a plan;
// ZRT_SIMPLE_KERNELS's gemm_epilogue and ZRT_TF32's parsing; and gemm_bias /
// gemm_bias_gelu on the CPU, which must equal the separate ops bit for bit
// (ones·bᵀ, then x·op(w) accumulated, then GELU) and a float64 reference
// within 1e-5 (f32) or 2e-2 (bf16) of 1 + max |reference|, at odd sizes and
// both weight layouts, on fresh random inputs whose seed is printed.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <iostream>
#include <random>
#include <thread>

#include "zrt/kernels/kernel_path.h"
#include "zrt/kernels/nn/activation.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/kernels/nn/gemm_epilogue.h"

using namespace zrt;
using namespace zrt::kernels;

namespace {

GemmEpilogueOperands aligned(DType t, std::int64_t m, std::int64_t n, std::int64_t k, bool gelu) {
  return {t, m, n, k, gelu, 0x1000, 0x2000, 0x3000, 0x4000, gelu ? std::uintptr_t{0x5000} : 0};
}

Tensor rnd(const Shape& shape, DType t, std::mt19937& gen) {
  std::uniform_real_distribution<double> dist(-2, 2);
  std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
  for (auto& x : v) x = dist(gen);
  return Tensor::from_doubles(v, t, Device::cpu(), shape);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const auto x = a.to_doubles(), y = b.to_doubles();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i])) return false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gemm_epilogue)

BOOST_AUTO_TEST_CASE(fits_takes_aligned_supported_operands) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    BOOST_TEST(gemm_epilogue_fits(aligned(t, 64, 128, 256, false)));
    BOOST_TEST(gemm_epilogue_fits(aligned(t, 64, 128, 256, true)));
    // Odd m and k, and odd n without GELU: cuBLASLt's heuristic decides.
    BOOST_TEST(gemm_epilogue_fits(aligned(t, 37, 19, 13, false)));
    BOOST_TEST(gemm_epilogue_fits(aligned(t, 1, 8, 1, true)));
  }
}

BOOST_AUTO_TEST_CASE(fits_refuses_what_cublaslt_cannot_take) {
  BOOST_TEST(!gemm_epilogue_fits(aligned(DType::f64, 64, 128, 256, false)));
  BOOST_TEST(!gemm_epilogue_fits(aligned(DType::i32, 64, 128, 256, false)));
  BOOST_TEST(!gemm_epilogue_fits(aligned(DType::f32, 0, 128, 256, false)));
  BOOST_TEST(!gemm_epilogue_fits(aligned(DType::f32, 64, 0, 256, false)));
  BOOST_TEST(!gemm_epilogue_fits(aligned(DType::f32, 64, 128, 0, false)));  // k = 0: c = bias only
  BOOST_TEST(!gemm_epilogue_fits(aligned(DType::f32, std::int64_t{1} << 31, 128, 256, false)));
  // GELU's aux matrix has leading dim n: a multiple of 8.
  BOOST_TEST(!gemm_epilogue_fits(aligned(DType::bf16, 64, 20, 256, true)));
  BOOST_TEST(gemm_epilogue_fits(aligned(DType::bf16, 64, 20, 256, false)));
  // GELU without a pre-activation address.
  auto no_pre = aligned(DType::f32, 64, 128, 256, true);
  no_pre.pre = 0;
  BOOST_TEST(!gemm_epilogue_fits(no_pre));
  // Each address a multiple of 16 bytes.
  for (std::uintptr_t GemmEpilogueOperands::*field :
       {&GemmEpilogueOperands::x, &GemmEpilogueOperands::w, &GemmEpilogueOperands::bias,
        &GemmEpilogueOperands::y, &GemmEpilogueOperands::pre}) {
    for (std::uintptr_t off : {std::uintptr_t{2}, std::uintptr_t{4}, std::uintptr_t{8}}) {
      auto o = aligned(DType::f32, 64, 128, 256, true);
      o.*field += off;
      BOOST_TEST(!gemm_epilogue_fits(o));
    }
    auto o = aligned(DType::f32, 64, 128, 256, true);
    o.*field += 16;
    BOOST_TEST(gemm_epilogue_fits(o));
  }
}

BOOST_AUTO_TEST_CASE(alignment_is_the_shared_power_of_two_capped_at_256) {
  BOOST_TEST(gemm_epilogue_alignment(aligned(DType::f32, 4, 8, 4, true)) == 256u);
  auto o = aligned(DType::f32, 4, 8, 4, false);
  o.bias += 16;
  BOOST_TEST(gemm_epilogue_alignment(o) == 16u);
  o.x += 32;
  BOOST_TEST(gemm_epilogue_alignment(o) == 16u);
  o = aligned(DType::f32, 4, 8, 4, true);
  o.pre += 64;
  BOOST_TEST(gemm_epilogue_alignment(o) == 64u);
}

BOOST_AUTO_TEST_CASE(simple_kernels_and_tf32_parsing) {
  BOOST_TEST(parse_simple_kernels("gemm_epilogue") == unsigned(FastKernel::gemm_epilogue));
  BOOST_TEST((parse_simple_kernels("all") & unsigned(FastKernel::gemm_epilogue)) != 0u);
  BOOST_TEST((parse_simple_kernels("attention") & unsigned(FastKernel::gemm_epilogue)) == 0u);
  for (const char* on : {"1", "true", "TRUE", "on", " On "}) BOOST_TEST(parse_tf32(on), on);
  for (const char* off : {"", "0", "false", "OFF", " 0 "}) BOOST_TEST(!parse_tf32(off), off);
  for (const char* bad : {"yes", "2", "junk"})
    BOOST_CHECK_EXCEPTION(parse_tf32(bad), InvalidArgument, [&](const InvalidArgument& e) {
      return std::string(e.what()).find(std::string("ZRT_TF32='") + bad + "' is not one of 0, 1") !=
             std::string::npos;
    });
  BOOST_TEST(!parse_tf32(nullptr));
  const bool before = tf32_gemms();
  {
    ScopedTf32Gemms on(true);
    BOOST_TEST(tf32_gemms());
    {
      ScopedTf32Gemms off(false);
      BOOST_TEST(!tf32_gemms());
    }
    BOOST_TEST(tf32_gemms());
    bool other_thread = true;
    std::thread([&] { other_thread = tf32_gemms(); }).join();
    BOOST_TEST(other_thread == before);  // the override is the calling thread's alone
  }
  BOOST_TEST(tf32_gemms() == before);
}

BOOST_AUTO_TEST_CASE(cpu_equals_the_separate_ops_and_a_f64_reference) {
  const unsigned seed = std::random_device{}();
  std::cout << "cpu_equals_the_separate_ops_and_a_f64_reference seed " << seed << "\n";
  std::mt19937 gen(seed);
  const std::int64_t sizes[][3] = {{1, 1, 1}, {5, 8, 3}, {37, 19, 13}, {33, 24, 71}, {4, 3, 0}};
  for (DType t : {DType::f32, DType::bf16}) {
    const double tol = t == DType::f32 ? 1e-5 : 2e-2;
    for (auto [m, n, k] : sizes) {
      for (bool trans_w : {false, true}) {
        BOOST_TEST_CONTEXT(dtype_name(t)
                           << " m " << m << " n " << n << " k " << k << " trans_w " << trans_w) {
          Tensor x = rnd({m, k}, t, gen), w = rnd(trans_w ? Shape{n, k} : Shape{k, n}, t, gen);
          Tensor b = rnd({n}, t, gen), ones = Tensor::full({m + 2}, 1.0, t);
          // The separate ops, as Linear and the GELU layer ran them.
          Tensor z_ref = Tensor::full({m, n}, NAN, t), y_ref = Tensor::full({m, n}, NAN, t);
          gemm(ones.slice(0, m).view({m, 1}), false, b.view({1, n}), false, z_ref, 1.0, 0.0);
          gemm(x, false, w, trans_w, z_ref, 1.0, 1.0);
          activation_forward(Activation::gelu, z_ref, y_ref);

          Tensor y = Tensor::full({m, n}, NAN, t);
          gemm_bias(x, w, trans_w, b, ones, y);
          BOOST_TEST(same_bits(y, z_ref));
          Tensor pre = Tensor::full({m, n}, NAN, t), g = Tensor::full({m, n}, NAN, t);
          gemm_bias_gelu(x, w, trans_w, b, ones, pre, g);
          BOOST_TEST(same_bits(pre, z_ref));
          BOOST_TEST(same_bits(g, y_ref));

          // float64 reference on the rounded inputs.
          const auto xv = x.to_doubles(), wv = w.to_doubles(), bv = b.to_doubles(),
                     pv = pre.to_doubles(), gv = g.to_doubles();
          double err = 0, gerr = 0, scale = 1;
          for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
              double s = bv[std::size_t(j)];
              for (std::int64_t p = 0; p < k; ++p)
                s += xv[std::size_t(i * k + p)] * wv[std::size_t(trans_w ? j * k + p : p * n + j)];
              const double ge = 0.5 * s * (1 + std::tanh(kGeluC * (s + kGeluK * s * s * s)));
              const std::size_t at = std::size_t(i * n + j);
              err = std::max(err, std::abs(pv[at] - s));
              gerr = std::max(gerr, std::abs(gv[at] - ge));
              scale = std::max(scale, 1 + std::abs(s));
            }
          }
          BOOST_TEST(err <= tol * scale, "pre max err " << err);
          BOOST_TEST(gerr <= tol * scale, "gelu max err " << gerr);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(argument_errors) {
  Tensor x = Tensor::zeros({4, 3}, DType::f32), w = Tensor::zeros({5, 3}, DType::f32);
  Tensor b = Tensor::zeros({5}, DType::f32), ones = Tensor::full({4}, 1.0, DType::f32);
  Tensor y = Tensor::zeros({4, 5}, DType::f32);
  BOOST_CHECK_NO_THROW(gemm_bias(x, w, true, b, ones, y));
  BOOST_CHECK_THROW(gemm_bias(x, w, false, b, ones, y), InvalidArgument);  // w [3, 5] needed
  BOOST_CHECK_THROW(gemm_bias(x, w, true, Tensor::zeros({4}, DType::f32), ones, y),
                    InvalidArgument);
  BOOST_CHECK_THROW(gemm_bias(x, w, true, b, Tensor::full({3}, 1.0, DType::f32), y),
                    InvalidArgument);
  BOOST_CHECK_THROW(gemm_bias(x, w, true, b, ones, Tensor::zeros({4, 4}, DType::f32)),
                    InvalidArgument);
  BOOST_CHECK_THROW(gemm_bias(x, w, true, Tensor::zeros({5}, DType::bf16), ones, y),
                    InvalidArgument);
  BOOST_CHECK_THROW(gemm_bias_gelu(x, w, true, b, ones, y, y), InvalidArgument);  // pre is y
  BOOST_CHECK_THROW(gemm_bias_gelu(x, w, true, b, ones, Tensor::zeros({4, 4}, DType::f32), y),
                    InvalidArgument);
}

// y may be x itself, never a shifted view of it: relu of [-1, 2, -3, 4, -5]
// from x[0:4] into x[1:5] read values it had already written.
BOOST_AUTO_TEST_CASE(activation_in_place_or_apart_only) {
  using kernels::Activation;
  Tensor x = Tensor::from_doubles({-1, 2, -3, 4, -5}, DType::f32);
  BOOST_CHECK_THROW(kernels::activation_forward(Activation::relu, x.slice(0, 4), x.slice(1, 4)),
                    InvalidArgument);
  BOOST_TEST(x.to_doubles() == (std::vector<double>{-1, 2, -3, 4, -5}));
  kernels::activation_forward(Activation::relu, x.slice(1, 4), x.slice(1, 4));
  BOOST_TEST(x.to_doubles() == (std::vector<double>{-1, 2, 0, 4, 0}));
}

BOOST_AUTO_TEST_SUITE_END()
