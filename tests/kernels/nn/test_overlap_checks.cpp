// Outputs that share memory with an input (or with another output) would be
// written while they are read: every kernel refuses a partial overlap, and
// accepts the exact in-place use its header allows. Each refused call was
// a silently wrong result before (e.g. residual_add into a view shifted by
// two gave 1 2 11 12 21 22 for 1 2 11 12 13 14). Empty tensors, which may
// have no storage at all, are accepted.
#include <boost/test/unit_test.hpp>

#include "tests/support/expect_throw.h"
#include "zrt/kernels/nn/activation.h"
#include "zrt/kernels/nn/cross_entropy.h"
#include "zrt/kernels/nn/embedding.h"
#include "zrt/kernels/nn/gemm_epilogue.h"
#include "zrt/kernels/nn/layernorm.h"
#include "zrt/kernels/nn/residual_add.h"
#include "zrt/kernels/ops/adamw.h"
#include "zrt/kernels/ops/grad_accumulate.h"
#include "zrt/kernels/ops/norm.h"

using namespace zrt;

namespace {

Tensor ramp(std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.25 * static_cast<double>(i) - 1.0;
  return Tensor::from_doubles(v, DType::f32);
}

template <class F>
void refused(F&& call, const std::string& part) {
  test::expect_throw<InvalidArgument>(call, part);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(overlap_checks)

BOOST_AUTO_TEST_CASE(elementwise_ops_take_exact_aliases_only) {
  Tensor buf = ramp(6);
  refused([&] { kernels::residual_add(buf.slice(0, 4), ramp(4), buf.slice(2, 4)); },
          "residual_add: output");
  kernels::residual_add(buf.slice(0, 4), ramp(4), buf.slice(0, 4));  // out may be a
  Tensor x = ramp(4), b5 = ramp(5);
  refused(
      [&] {
        kernels::activation_backward(kernels::Activation::relu, x, b5.slice(0, 4), b5.slice(1, 4));
      },
      "overlaps dy");
  refused(
      [&] {
        kernels::activation_backward(kernels::Activation::relu, b5.slice(0, 4), ramp(4),
                                     b5.slice(1, 4));
      },
      "overlaps x");
  kernels::activation_backward(kernels::Activation::relu, x, b5.slice(0, 4), b5.slice(0, 4));
  Tensor b6 = ramp(6);
  refused([&] { kernels::accumulate_grad(b6.slice(1, 4), b6.slice(0, 4)); }, "overlaps grad");
  kernels::accumulate_grad(b6.slice(1, 4), b6.slice(1, 4));
}

BOOST_AUTO_TEST_CASE(embedding_outputs_stay_apart) {
  Tensor w = ramp(8);
  const Tensor ids = Tensor::from_doubles({3, 2, 1}, DType::i64);
  refused(
      [&] {
        kernels::embedding_forward(ids, w.view({4, 2}), nullptr, w.slice(2, 6).view({3, 2}));
      },
      "overlaps wte");
  const Tensor ids4 = Tensor::from_doubles({0, 1, 1, 0}, DType::i64, Device::cpu(), {2, 2});
  Tensor b8 = ramp(8);
  refused(
      [&] {
        kernels::embedding_backward(ids4, b8.view({2, 2, 2}), b8.slice(2, 4).view({2, 2}), nullptr,
                                    false);
      },
      "overlaps dout");
  Tensor grads = ramp(8);
  const Tensor dwpe = grads.slice(2, 4).view({2, 2});
  refused(
      [&] {
        kernels::embedding_backward(ids4, ramp(8).view({2, 2, 2}), grads.slice(0, 4).view({2, 2}),
                                    &dwpe, false);
      },
      "outputs dwte");
}

BOOST_AUTO_TEST_CASE(cross_entropy_writes_dlogits_over_logits_only) {
  Tensor buf = ramp(12);
  const Tensor logits = buf.slice(0, 9).view({3, 3});
  const Tensor targets = Tensor::from_doubles({0, 2, 1}, DType::i64);
  Tensor losses = Tensor::empty({3}, DType::f32), lse = Tensor::empty({3}, DType::f32),
         loss = Tensor::empty({1}, DType::f32);
  kernels::cross_entropy_forward(logits, targets, 3.0, losses, lse, loss);
  refused(
      [&] {
        kernels::cross_entropy_backward(logits, targets, lse, 1.0, 3.0,
                                        buf.slice(3, 9).view({3, 3}));
      },
      "overlaps logits");
  kernels::cross_entropy_backward(logits, targets, lse, 1.0, 3.0, logits);  // may be logits
  Tensor both = ramp(4);
  refused(
      [&] {
        kernels::cross_entropy_fused(ramp(9).view({3, 3}), targets, 0, 3.0, 1.0, both.slice(0, 3),
                                     both.slice(2, 1), Tensor::empty({3, 3}, DType::f32));
      },
      "outputs losses");
}

BOOST_AUTO_TEST_CASE(layernorm_outputs_stay_apart) {
  Tensor buf = ramp(10);
  const Tensor x = buf.slice(0, 8).view({2, 4});
  const Tensor w = ramp(4), b = ramp(4);
  Tensor y = Tensor::empty({2, 4}, DType::f32), rstd = Tensor::empty({2}, DType::f32);
  refused([&] { kernels::layernorm_forward(x, w, b, y, buf.slice(6, 2), rstd); }, "overlaps x");
  Tensor mean = Tensor::empty({2}, DType::f32);
  kernels::layernorm_forward(x, w, b, y, mean, rstd);
  Tensor dy = ramp(8).view({2, 4}), dx = Tensor::empty({2, 4}, DType::f32);
  refused(
      [&] {
        kernels::layernorm_backward(dy, x, w, mean, rstd, dx, dy.view({8}).slice(0, 4),
                                    Tensor::empty({4}, DType::f32), false);
      },
      "overlaps dy");
  kernels::layernorm_backward(dy, x, w, mean, rstd, dy, Tensor::empty({4}, DType::f32),
                              Tensor::empty({4}, DType::f32), false);  // dx may be dy
}

BOOST_AUTO_TEST_CASE(adamw_state_and_gradient_stay_apart) {
  const kernels::AdamWHyperparams hp{
      .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0};
  Tensor p = ramp(2), m = Tensor::zeros({2}, DType::f32), g = ramp(2);
  refused([&] { kernels::fused_adamw(p, m, m, g, 1, hp, {}); }, "outputs exp_avg");
  refused([&] { kernels::fused_adamw(p, Tensor::zeros({2}, DType::f32), m, p, 1, hp, {}); },
          "overlaps grad");
  kernels::fused_adamw(p, m, Tensor::zeros({2}, DType::f32), g, 1, hp, {});
}

// gemm_bias names its own inputs, not the operands of the GEMMs inside it.
BOOST_AUTO_TEST_CASE(gemm_bias_names_its_inputs) {
  Tensor buf = ramp(6);
  refused(
      [&] {
        kernels::gemm_bias(ramp(6).view({3, 2}), ramp(2).view({1, 2}), true, ramp(1),
                           buf.slice(0, 4), buf.slice(3, 3).view({3, 1}));
      },
      "overlaps ones");
}

BOOST_AUTO_TEST_CASE(empty_tensors_need_no_storage) {
  const Tensor empty = Tensor::zeros({0}, DType::f32);
  BOOST_TEST(kernels::squared_norm(empty).squared_norm == 0.0);
  BOOST_TEST(!kernels::has_non_finite(empty));
  kernels::accumulate_grad(empty, Tensor::zeros({0}, DType::f32));
}

BOOST_AUTO_TEST_SUITE_END()
