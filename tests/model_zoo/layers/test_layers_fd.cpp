// Every layer's backward against central finite differences of its forward,
// in f64 on the CPU (layers compute in double for f64, Note [Compute
// precision] in kernels/nn/element.h). Objective: sum(forward(...) * r) for a
// fixed random r, whose gradient w.r.t. the output is r. Tolerance: 1e-6
// relative (central differences with h = 1e-5 are exact to ~1e-9 here).
#include <boost/test/unit_test.hpp>
#include <functional>

#include "tests/model_zoo/layers/layer_test_util.h"
#include "zrt/model_zoo/layers/activation_layer.h"
#include "zrt/model_zoo/layers/causal_self_attention.h"
#include "zrt/model_zoo/layers/cross_entropy.h"
#include "zrt/model_zoo/layers/embedding.h"
#include "zrt/model_zoo/layers/layer_norm.h"
#include "zrt/model_zoo/layers/linear.h"
#include "zrt/model_zoo/layers/residual_add.h"

using namespace zrt;
using namespace zrt::model_zoo;
using namespace zrt::model_zoo::test;

namespace {

constexpr DType f64 = DType::f64;

// Compares `analytic` with central differences of `objective` w.r.t. the
// elements of `wrt` (all of them, or 40 random ones for larger tensors).
void check_fd(const std::string& what, Tensor wrt, const Tensor& analytic,
              const std::function<double()>& objective, std::mt19937& gen) {
  BOOST_REQUIRE_EQUAL(wrt.numel(), analytic.numel());
  const double h = 1e-5;
  std::vector<std::int64_t> idx;
  for (std::int64_t i = 0; i < wrt.numel(); ++i) idx.push_back(i);
  if (idx.size() > 40) {
    std::shuffle(idx.begin(), idx.end(), gen);
    idx.resize(40);
  }
  for (std::int64_t i : idx) {
    const double v = wrt.item(i);
    wrt.set_item(i, v + h);
    const double fp = objective();
    wrt.set_item(i, v - h);
    const double fm = objective();
    wrt.set_item(i, v);
    const double fd = (fp - fm) / (2 * h), an = analytic.item(i);
    BOOST_TEST(std::abs(fd - an) <= 1e-6 * (1 + std::abs(fd)),
               what << "[" << i << "]: analytic " << an << " vs finite difference " << fd);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layers_fd)

BOOST_AUTO_TEST_CASE(linear_both_layouts_with_and_without_bias) {
  std::mt19937 gen(1);
  for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
    for (bool bias : {true, false}) {
      const std::int64_t in = 5, out = 3;
      Param w =
          random_param(layout == WeightLayout::out_in ? Shape{out, in} : Shape{in, out}, f64, gen);
      std::optional<Param> b;
      if (bias) b = random_param({out}, f64, gen);
      Linear lin(w, b, layout);
      Tensor x = random_tensor({2, 3, in}, f64, gen);
      Tensor r = random_tensor({2, 3, out}, f64, gen);
      auto objective = [&] { return dot(lin.forward(x), r); };
      objective();
      Tensor dx = lin.backward(r, GradMode::overwrite);
      const std::string tag = layout == WeightLayout::out_in ? "out_in" : "in_out";
      check_fd(tag + " dx", x, dx, objective, gen);
      check_fd(tag + " dweight", w.value, w.grad, objective, gen);
      if (bias) check_fd(tag + " dbias", b->value, b->grad, objective, gen);
      // Accumulate mode adds the same gradient on top of what is there.
      Tensor before = w.grad.clone();
      lin.forward(x);
      lin.backward(r, GradMode::accumulate);
      auto acc = w.grad.to_doubles(), base = before.to_doubles();
      for (std::size_t i = 0; i < acc.size(); ++i)
        BOOST_TEST(acc[i] == 2 * base[i], boost::test_tools::tolerance(1e-12));
    }
  }
}

BOOST_AUTO_TEST_CASE(linear_forward_gelu_with_the_gelu_layer) {
  // GPT's MLP: Linear::forward_gelu hands the pre-activation to the GELU layer
  // (record_input). The outputs equal forward then Gelu bit for bit, and the
  // backward through both matches central differences.
  std::mt19937 gen(4);
  for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
    for (bool bias : {true, false}) {
      const std::int64_t in = 5, out = 8;
      Param w =
          random_param(layout == WeightLayout::out_in ? Shape{out, in} : Shape{in, out}, f64, gen);
      std::optional<Param> b;
      if (bias) b = random_param({out}, f64, gen);
      Linear lin(w, b, layout);
      Gelu gelu;
      Tensor x = random_tensor({2, 3, in}, f64, gen);
      Tensor r = random_tensor({2, 3, out}, f64, gen);
      const Tensor pre_ref = lin.forward(x);
      const Tensor out_ref = gelu.forward(pre_ref);
      lin.release();
      gelu.release();
      Linear::GeluOutput h = lin.forward_gelu(x);
      BOOST_TEST(max_abs_diff(h.pre, pre_ref) == 0.0);
      BOOST_TEST(max_abs_diff(h.out, out_ref) == 0.0);
      gelu.record_input(h.pre);
      Tensor dx = lin.backward(gelu.backward(r), GradMode::overwrite);
      auto objective = [&] {
        Linear::GeluOutput o = lin.forward_gelu(x);
        lin.release();
        return dot(o.out, r);
      };
      const std::string tag =
          std::string(layout == WeightLayout::out_in ? "out_in" : "in_out") + " gelu";
      check_fd(tag + " dx", x, dx, objective, gen);
      check_fd(tag + " dweight", w.value, w.grad, objective, gen);
      if (bias) check_fd(tag + " dbias", b->value, b->grad, objective, gen);
    }
  }
}

BOOST_AUTO_TEST_CASE(linear_rejects_bad_shapes_and_backward_without_forward) {
  std::mt19937 gen(2);
  Linear lin(random_param({3, 5}, f64, gen), std::nullopt);
  BOOST_CHECK_THROW(lin.forward(random_tensor({2, 4}, f64, gen)), InvalidArgument);
  BOOST_CHECK_THROW(lin.backward(random_tensor({2, 3}, f64, gen), GradMode::overwrite),
                    InvalidState);
  BOOST_CHECK_THROW(
      Linear(Param{Tensor::zeros({3, 5}, f64), Tensor::zeros({5, 3}, f64)}, std::nullopt),
      InvalidArgument);
}

BOOST_AUTO_TEST_CASE(gelu_and_relu) {
  std::mt19937 gen(3);
  Gelu gelu;
  Relu relu;
  for (ActivationLayer* layer :
       {static_cast<ActivationLayer*>(&gelu), static_cast<ActivationLayer*>(&relu)}) {
    Tensor x = random_tensor({3, 7}, f64, gen, -3, 3);
    Tensor r = random_tensor({3, 7}, f64, gen);
    auto objective = [&] { return dot(layer->forward(x), r); };
    objective();
    check_fd(layer == &gelu ? "gelu dx" : "relu dx", x, layer->backward(r), objective, gen);
  }
}

BOOST_AUTO_TEST_CASE(layer_norm) {
  std::mt19937 gen(4);
  Param w = random_param({7}, f64, gen), b = random_param({7}, f64, gen);
  LayerNorm ln(w, b);
  Tensor x = random_tensor({2, 3, 7}, f64, gen, -2, 2);
  Tensor r = random_tensor({2, 3, 7}, f64, gen);
  auto objective = [&] { return dot(ln.forward(x), r); };
  objective();
  Tensor dx = ln.backward(r, GradMode::overwrite);
  check_fd("layernorm dx", x, dx, objective, gen);
  check_fd("layernorm dweight", w.value, w.grad, objective, gen);
  check_fd("layernorm dbias", b.value, b.grad, objective, gen);
}

BOOST_AUTO_TEST_CASE(token_and_position_embedding) {
  std::mt19937 gen(5);
  Param wte = random_param({6, 4}, f64, gen), wpe = random_param({5, 4}, f64, gen);
  Embedding emb(wte, wpe);
  // Repeated tokens, one token (5) never used: its gradient row must be 0.
  Tensor ids = Tensor::from_doubles({0, 3, 3, 1, 3, 2, 0, 4}, DType::i32, Device::cpu(), {2, 4});
  Tensor r = random_tensor({2, 4, 4}, f64, gen);
  auto objective = [&] { return dot(emb.forward(ids), r); };
  objective();
  emb.backward(r, GradMode::overwrite);
  check_fd("embedding dwte", wte.value, wte.grad, objective, gen);
  check_fd("embedding dwpe", wpe.value, wpe.grad, objective, gen);
  BOOST_CHECK_THROW(emb.forward(Tensor::from_doubles({0, 6}, DType::i64, Device::cpu(), {1, 2})),
                    InvalidArgument);
  BOOST_CHECK_THROW(
      emb.forward(Tensor::from_doubles({0, 1, 2, 3, 4, 5}, DType::i64, Device::cpu(), {1, 6})),
      InvalidArgument);  // longer than the position table
}

BOOST_AUTO_TEST_CASE(causal_self_attention_both_layouts) {
  std::mt19937 gen(6);
  const std::int64_t c = 6, heads = 2;
  for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
    Param wqkv =
        random_param(layout == WeightLayout::out_in ? Shape{3 * c, c} : Shape{c, 3 * c}, f64, gen);
    Param bqkv = random_param({3 * c}, f64, gen);
    Param wproj = random_param({c, c}, f64, gen), bproj = random_param({c}, f64, gen);
    CausalSelfAttention attn(wqkv, bqkv, wproj, bproj, heads, layout);
    Tensor x = random_tensor({2, 5, c}, f64, gen);
    Tensor r = random_tensor({2, 5, c}, f64, gen);
    auto objective = [&] { return dot(attn.forward(x), r); };
    objective();
    Tensor dx = attn.backward(r, GradMode::overwrite);
    check_fd("attention dx", x, dx, objective, gen);
    check_fd("attention dwqkv", wqkv.value, wqkv.grad, objective, gen);
    check_fd("attention dbqkv", bqkv.value, bqkv.grad, objective, gen);
    check_fd("attention dwproj", wproj.value, wproj.grad, objective, gen);
    check_fd("attention dbproj", bproj.value, bproj.grad, objective, gen);
  }
  BOOST_CHECK_THROW(CausalSelfAttention(random_param({18, 6}, f64, gen), std::nullopt,
                                        random_param({6, 6}, f64, gen), std::nullopt, 4),
                    InvalidArgument);
}

BOOST_AUTO_TEST_CASE(cross_entropy_with_ignored_targets_and_normaliser) {
  std::mt19937 gen(7);
  Tensor logits = random_tensor({4, 7}, f64, gen, -3, 3);
  Tensor targets = Tensor::from_doubles({2, -1, 6, 0}, DType::i64);
  CrossEntropy ce;
  const double normaliser = 5.0, dloss = 1.3;
  auto objective = [&] { return dloss * ce.forward(logits, targets, normaliser).item(0); };
  objective();
  Tensor dlogits = ce.backward(dloss);
  check_fd("cross-entropy dlogits", logits, dlogits, objective, gen);
  for (std::int64_t i = 7; i < 14; ++i) BOOST_TEST(dlogits.item(i) == 0.0);  // ignored row
  BOOST_CHECK_THROW(ce.forward(logits, Tensor::from_doubles({2, 7, 0, 0}, DType::i64), 1.0),
                    InvalidArgument);
  BOOST_CHECK_THROW(ce.forward(logits, targets, 0.0), InvalidArgument);
}

BOOST_AUTO_TEST_CASE(residual_add) {
  std::mt19937 gen(8);
  Tensor a = random_tensor({3, 5}, f64, gen), b = random_tensor({3, 5}, f64, gen);
  ResidualAdd add;
  Tensor out = add.forward(a, b);
  auto av = a.to_doubles(), bv = b.to_doubles(), ov = out.to_doubles();
  for (std::size_t i = 0; i < ov.size(); ++i) BOOST_TEST(ov[i] == av[i] + bv[i]);
  auto [da, db] = add.backward(out);
  BOOST_TEST(da.shares_storage(out));
  BOOST_CHECK_THROW(add.forward(a, random_tensor({5, 3}, f64, gen)), InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()
