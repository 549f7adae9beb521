// A layer used wrongly says what the caller got wrong, in the caller's terms:
// an input whose dtype is not the parameters' (Note [A layer's input against
// its parameters]), and a layer bound to ZeroModule::param_views run outside
// its unit's scopes (Note [Freed storage]). The exact texts: these are the
// messages the README's tutorial leads a user to.
#include <boost/test/unit_test.hpp>

#include <random>
#include <string>

#include "tests/model_zoo/layers/layer_test_util.h"
#include "tests/support/test_seed.h"
#include "zrt/kernels/nn/gemm.h"
#include "zrt/model_zoo/layers/layer_norm.h"
#include "zrt/model_zoo/layers/linear.h"
#include "zrt/optim/zero_module.h"
#include "zrt/runtime/comm/local_comm.h"

using namespace zrt;
using model_zoo::GradMode;
using model_zoo::Linear;
using model_zoo::Param;

namespace {

// The message `call` throws as E ("" and a test error when it throws nothing),
// without the source location an internal error (InvalidState) ends with.
template <class E, class F>
std::string message_of(F&& call) {
  try {
    call();
  } catch (const E& e) {
    const std::string what = e.what();
    return what.substr(0, what.find(" [check `"));
  }
  BOOST_ERROR("expected an error");
  return "";
}

// fc1 (weight [64, 20], bias [64]) in a ZeroModule of one rank, computing
// in `dtype`, and a Linear layer bound once to its views.
struct Fc1 {
  explicit Fc1(DType dtype, std::mt19937& rng)
      : m(make_local_world(1)[0], {.dtype = dtype}),
        unit(m.add_unit("fc1",
                        {{"weight", model_zoo::test::random_tensor({64, 20}, DType::f32, rng)},
                         {"bias", model_zoo::test::random_tensor({64}, DType::f32, rng)}})),
        layer(param("weight"), param("bias")) {}
  Param param(const char* name) const {
    const auto v = m.param_views(unit, name);
    return {v.param, v.grad};
  }
  optim::ZeroModule m;
  optim::ZeroModule::Unit unit;
  Linear layer;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(layer_messages)

// Before the layer checked, the GEMM's operand check blamed the parameter:
// "gemm_bias: fc1.weight[64, 20] bf16 cpu must have dtype f32 like
// tensor[64, 20] f32 cpu".
BOOST_AUTO_TEST_CASE(an_input_of_another_dtype_is_blamed) {
  std::mt19937 rng(test::test_seed("layer_messages/an_input_of_another_dtype_is_blamed"));
  Fc1 fc1(DType::bf16, rng);
  const Tensor x = model_zoo::test::random_tensor({7, 20}, DType::f32, rng);
  auto s = fc1.m.forward(fc1.unit);
  BOOST_TEST(message_of<InvalidArgument>([&] { fc1.layer.forward(x); }) ==
             "Linear fc1.weight: input [7, 20] is f32 but the layer's parameters are bf16; cast "
             "the input to bf16");
  BOOST_TEST(message_of<InvalidArgument>([&] { fc1.layer.forward_gelu(x); }) ==
             "Linear fc1.weight: input [7, 20] is f32 but the layer's parameters are bf16; cast "
             "the input to bf16");
  fc1.layer.forward(x.to(DType::bf16));
  const Tensor dy = model_zoo::test::random_tensor({7, 64}, DType::f32, rng);
  BOOST_TEST(message_of<InvalidArgument>([&] { fc1.layer.backward(dy, GradMode::accumulate); }) ==
             "Linear fc1.weight: output gradient [7, 64] is f32 but the layer's parameters are "
             "bf16; cast the output gradient to bf16");

  model_zoo::LayerNorm ln(model_zoo::test::random_param({5}, DType::bf16, rng),
                          model_zoo::test::random_param({5}, DType::bf16, rng));
  BOOST_TEST(message_of<InvalidArgument>([&] {
               ln.forward(model_zoo::test::random_tensor({3, 5}, DType::f32, rng));
             }) ==
             "LayerNorm: input [3, 5] is f32 but the layer's parameters are bf16; cast the "
             "input to bf16");
}

// Below the layers, a kernel whose operands disagree takes a named operand
// (a parameter) as the dtype to match and blames the unnamed one.
BOOST_AUTO_TEST_CASE(a_kernel_blames_the_unnamed_operand) {
  std::mt19937 rng(test::test_seed("layer_messages/a_kernel_blames_the_unnamed_operand"));
  const Tensor x = model_zoo::test::random_tensor({7, 20}, DType::f32, rng);
  Tensor w = model_zoo::test::random_tensor({64, 20}, DType::bf16, rng);
  w.set_name("fc1.weight");
  const Tensor y = Tensor::empty({7, 64}, DType::bf16);
  BOOST_TEST(message_of<InvalidArgument>([&] { kernels::gemm(x, false, w, true, y); }) ==
             "gemm: tensor[7, 20] f32 cpu must have dtype bf16 like fc1.weight[64, 20] bf16 cpu");
}

// Before the module said where the memory is: "gemm: tensor fc1.bias[1, 64]
// f32 cpu has freed storage" (the CPU GEMM adds the bias first).
BOOST_AUTO_TEST_CASE(a_layer_outside_its_units_scope_is_told_where_to_run) {
  std::mt19937 rng(test::test_seed("layer_messages/a_layer_outside_its_units_scope"));
  Fc1 fc1(DType::f32, rng);
  const Tensor x = model_zoo::test::random_tensor({7, 20}, DType::f32, rng);
  const std::string outside =
      message_of<InvalidState>([&] { fc1.layer.forward(x); });  // no scope open
  BOOST_TEST(outside ==
             "gemm: fc1.bias[1, 64] f32 cpu has no memory outside its unit's scope: call "
             "the layer inside m.forward(unit) or m.backward(unit) of unit 'fc1', m the "
             "ZeroModule whose param_views gave the layer this view");
  { auto s = fc1.m.forward(fc1.unit); }
  BOOST_TEST(message_of<InvalidState>([&] { fc1.layer.forward(x); }) == outside);  // after one

  // A backward in a forward scope: the gradients exist in backward scopes only.
  const Tensor dy = model_zoo::test::random_tensor({7, 64}, DType::f32, rng);
  {
    auto s = fc1.m.forward(fc1.unit);
    fc1.layer.forward(x);
    BOOST_TEST(message_of<InvalidState>([&] { fc1.layer.backward(dy, GradMode::accumulate); }) ==
               "gemm: fc1.weight.grad[64, 20] f32 cpu has no memory outside its unit's backward "
               "scope: call the layer's backward inside m.backward(unit) of unit 'fc1', m the "
               "ZeroModule whose param_views gave the layer this view");
  }
  {
    auto s = fc1.m.backward(fc1.unit);
    fc1.layer.forward(x);
    fc1.layer.backward(dy, GradMode::accumulate);  // inside its scopes, it runs
  }
  fc1.m.step(1e-3);
}

// A parameter tied to a later unit is used in that unit's scopes too: the
// owner's message names its users.
BOOST_AUTO_TEST_CASE(a_tied_parameter_outside_every_scope_names_its_users) {
  std::mt19937 rng(test::test_seed("layer_messages/a_tied_parameter_outside_every_scope"));
  optim::ZeroModule m(make_local_world(1)[0]);
  const Tensor shared = model_zoo::test::random_tensor({5, 3}, DType::f32, rng);
  const auto embed = m.add_unit("embed", {{"weight", shared}});
  const auto head = m.add_unit(
      "head", {{"weight", shared}, {"bias", model_zoo::test::random_tensor({5}, DType::f32, rng)}});
  const Tensor tied = m.param_views(head, "weight").param;
  const std::string data_access = message_of<InvalidState>([&] { (void)tied.data<float>(); });
  BOOST_TEST(data_access.find("has no memory outside its unit's scope: call the layer inside "
                              "m.forward(unit) or m.backward(unit) of unit 'embed' (or of a unit "
                              "that uses it tied: 'head')") != std::string::npos,
             data_access);
  // The user's own parameters name the user alone.
  const Tensor bias = m.param_views(head, "bias").param;
  const std::string own = message_of<InvalidState>([&] { (void)bias.data<float>(); });
  BOOST_TEST(own.find("of unit 'head'") != std::string::npos, own);
  BOOST_TEST(own.find("tied") == std::string::npos, own);
  (void)embed;
}

// A backward without its forward is the caller's mistake: said as one, with
// no internal check or source place after it.
BOOST_AUTO_TEST_CASE(a_backward_without_its_forward_is_the_callers_mistake) {
  std::mt19937 rng(test::test_seed("layer_messages/a_backward_without_its_forward"));
  model_zoo::LayerNorm ln(model_zoo::test::random_param({5}, DType::f32, rng),
                          model_zoo::test::random_param({5}, DType::f32, rng));
  const Tensor dy = model_zoo::test::random_tensor({3, 5}, DType::f32, rng);
  std::string said;
  try {
    ln.backward(dy, GradMode::accumulate);
  } catch (const InvalidState& e) {
    said = e.what();
  }
  BOOST_TEST(said ==
             "LayerNorm: backward called without a forward since the last backward (a layer "
             "keeps the input of its last forward only: one used twice needs a backward after "
             "each forward, or a layer per use)");
}

BOOST_AUTO_TEST_SUITE_END()
