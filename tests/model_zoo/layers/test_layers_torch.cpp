// Each layer's forward and backward against PyTorch (Debian's python3-torch
// run as ZRT_PYTHON, float32 on the CPU), with data exchanged as raw .bin
// files in a temp dir; and each layer's bf16 forward against its f32 forward.
//
// Tolerances: f32 results within 1e-4 * (1 + max |reference|) of PyTorch
// (both sum in fp32, in different orders); bf16 forwards within 4e-2 *
// (1 + max |f32 output|) of f32 (bf16 keeps 8 mantissa bits, ~4e-3 per
// rounding, and inputs, parameters and outputs are each rounded).
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/model_zoo/layers/layer_test_util.h"
#include "zrt/model_zoo/layers/activation_layer.h"
#include "zrt/model_zoo/layers/causal_self_attention.h"
#include "zrt/model_zoo/layers/cross_entropy.h"
#include "zrt/model_zoo/layers/embedding.h"
#include "zrt/model_zoo/layers/layer_norm.h"
#include "zrt/model_zoo/layers/linear.h"

using namespace zrt;
using namespace zrt::model_zoo;
using namespace zrt::model_zoo::test;
namespace fs = std::filesystem;

namespace {

constexpr DType f32 = DType::f32;

// One PyTorch run: inputs written before run(), outputs read after.
class TorchCase {
 public:
  explicit TorchCase(std::string name) : name_(std::move(name)) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("zrt_layers_torch_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  ~TorchCase() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void input(const std::string& name, const Tensor& t) {
    const bool ids = t.dtype() == DType::i32 || t.dtype() == DType::i64;
    Tensor host = t.to(ids ? DType::i64 : f32);
    std::ofstream(dir_ / (name + ".bin"), std::ios::binary)
        .write(static_cast<const char*>(host.data_ptr()),
               static_cast<std::streamsize>(host.nbytes()));
    std::string shape;
    for (auto d : t.shape()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    args_ += " " + name + "_shape=" + shape;
  }
  void arg(const std::string& key, double value) {
    std::ostringstream os;
    os.precision(17);
    os << " " << key << "=" << value;
    args_ += os.str();
  }
  void run() {
    const std::string cmd = std::string(ZRT_PYTHON) + " " + ZRT_SOURCE_DIR +
                            "/tests/model_zoo/layers/torch_reference.py " + name_ + " " +
                            dir_.string() + args_;
    const int rc = std::system(cmd.c_str());
    BOOST_REQUIRE_MESSAGE(rc == 0, "PyTorch reference failed (exit "
                                       << rc << ") for `" << cmd
                                       << "`: is python3-torch installed for " << ZRT_PYTHON
                                       << "?");
  }
  Tensor output(const std::string& name, const Shape& shape) const {
    Tensor t = Tensor::empty(shape, f32);
    std::ifstream in(dir_ / (name + ".bin"), std::ios::binary);
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    BOOST_REQUIRE_MESSAGE(in.gcount() == static_cast<std::streamsize>(t.nbytes()),
                          "PyTorch output " << name << " is missing or short");
    return t;
  }

 private:
  std::string name_, args_;
  fs::path dir_;
};

void check_close(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
  BOOST_REQUIRE_EQUAL(got.numel(), want.numel());
  const double err = max_abs_diff(got, want), bound = tol * (1 + max_abs(want));
  BOOST_TEST(err <= bound, what << ": max |diff| " << err << " > " << bound);
}

void check_torch(const std::string& what, const Tensor& got, const TorchCase& ref,
                 const std::string& name) {
  check_close(what + " vs torch", got, ref.output(name, got.shape()), 1e-4);
}

// An affine layer (weight w, bias b) against torch's `ref_name` on the same
// x, w, b and dy: its output y, input gradient dx and w's and b's gradients.
void check_affine_vs_torch(const std::string& what, const char* ref_name, const Tensor& x,
                           const Param& w, const Param& b, const Tensor& dy, const Tensor& y,
                           const Tensor& dx) {
  TorchCase ref(ref_name);
  ref.input("x", x), ref.input("w", w.value), ref.input("b", b.value), ref.input("dy", dy);
  ref.run();
  check_torch(what + " y", y, ref, "y");
  check_torch(what + " dx", dx, ref, "dx");
  check_torch(what + " dw", w.grad, ref, "dw");
  check_torch(what + " db", b.grad, ref, "db");
}

void check_bf16(const std::string& what, const Tensor& bf16_out, const Tensor& f32_out) {
  BOOST_TEST(bf16_out.dtype() == DType::bf16);
  check_close(what + " bf16 vs f32", bf16_out, f32_out, 4e-2);
}

Param to_dtype(const Param& p, DType t) { return Param{p.value.to(t), p.grad.to(t)}; }

}  // namespace

BOOST_AUTO_TEST_SUITE(layers_torch)

BOOST_AUTO_TEST_CASE(linear) {
  std::mt19937 gen(11);
  const std::int64_t in = 23, out = 9;  // 2^4 + 7 inputs
  for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
    const bool torch_layout = layout == WeightLayout::out_in;
    Param w = random_param(torch_layout ? Shape{out, in} : Shape{in, out}, f32, gen);
    Param b = random_param({out}, f32, gen);
    Tensor x = random_tensor({3, 5, in}, f32, gen), dy = random_tensor({3, 5, out}, f32, gen);
    Linear lin(w, b, layout);
    Tensor y = lin.forward(x);
    Tensor dx = lin.backward(dy, GradMode::overwrite);
    check_affine_vs_torch("linear", torch_layout ? "linear_out_in" : "linear_in_out", x, w, b, dy,
                          y, dx);
    Linear lin16(to_dtype(w, DType::bf16), to_dtype(b, DType::bf16), layout);
    check_bf16("linear", lin16.forward(x.to(DType::bf16)), y);
  }
}

BOOST_AUTO_TEST_CASE(gelu_and_relu) {
  std::mt19937 gen(12);
  for (const char* name : {"gelu", "relu"}) {
    const bool is_gelu = std::string(name) == "gelu";
    ActivationLayer layer(is_gelu ? kernels::Activation::gelu : kernels::Activation::relu);
    Tensor x = random_tensor({5, 39}, f32, gen, -4, 4), dy = random_tensor({5, 39}, f32, gen);
    Tensor y = layer.forward(x);
    Tensor dx = layer.backward(dy);
    TorchCase ref(name);
    ref.input("x", x), ref.input("dy", dy);
    ref.run();
    check_torch(std::string(name) + " y", y, ref, "y");
    check_torch(std::string(name) + " dx", dx, ref, "dx");
    check_bf16(name, layer.forward(x.to(DType::bf16)), y);
  }
}

BOOST_AUTO_TEST_CASE(layer_norm) {
  std::mt19937 gen(13);
  const std::int64_t c = 71;  // 2^6 + 7
  Param w = random_param({c}, f32, gen), b = random_param({c}, f32, gen);
  Tensor x = random_tensor({3, 5, c}, f32, gen, -2, 3), dy = random_tensor({3, 5, c}, f32, gen);
  LayerNorm ln(w, b);
  Tensor y = ln.forward(x);
  Tensor dx = ln.backward(dy, GradMode::overwrite);
  check_affine_vs_torch("layernorm", "layernorm", x, w, b, dy, y, dx);
  LayerNorm ln16(to_dtype(w, DType::bf16), to_dtype(b, DType::bf16));
  check_bf16("layernorm", ln16.forward(x.to(DType::bf16)), y);
}

BOOST_AUTO_TEST_CASE(embedding) {
  std::mt19937 gen(14);
  const std::int64_t vocab = 13, c = 7, positions = 9, batch = 3, seq = 7;
  Param wte = random_param({vocab, c}, f32, gen), wpe = random_param({positions, c}, f32, gen);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  std::vector<double> idv(batch * seq);
  for (auto& v : idv) v = tok(gen);
  Tensor ids = Tensor::from_doubles(idv, DType::i32, Device::cpu(), {batch, seq});
  Tensor dy = random_tensor({batch, seq, c}, f32, gen);
  Embedding emb(wte, wpe);
  Tensor y = emb.forward(ids);
  emb.backward(dy, GradMode::overwrite);
  TorchCase ref("embedding");
  ref.input("ids", ids), ref.input("wte", wte.value), ref.input("wpe", wpe.value),
      ref.input("dy", dy);
  ref.run();
  check_torch("embedding y", y, ref, "y");
  check_torch("embedding dwte", wte.grad, ref, "dwte");
  check_torch("embedding dwpe", wpe.grad, ref, "dwpe");
  Embedding emb16(to_dtype(wte, DType::bf16), to_dtype(wpe, DType::bf16));
  check_bf16("embedding", emb16.forward(ids), y);
}

BOOST_AUTO_TEST_CASE(causal_self_attention) {
  std::mt19937 gen(15);
  const std::int64_t batch = 2, seq = 9, c = 12, heads = 3;
  Param wqkv = random_param({3 * c, c}, f32, gen), bqkv = random_param({3 * c}, f32, gen);
  Param wproj = random_param({c, c}, f32, gen), bproj = random_param({c}, f32, gen);
  Tensor x = random_tensor({batch, seq, c}, f32, gen),
         dy = random_tensor({batch, seq, c}, f32, gen);
  CausalSelfAttention attn(wqkv, bqkv, wproj, bproj, heads);
  Tensor y = attn.forward(x);
  Tensor dx = attn.backward(dy, GradMode::overwrite);
  TorchCase ref("attention");
  ref.input("x", x), ref.input("dy", dy), ref.input("wqkv", wqkv.value),
      ref.input("bqkv", bqkv.value);
  ref.input("wproj", wproj.value), ref.input("bproj", bproj.value);
  ref.arg("n_head", double(heads));
  ref.run();
  check_torch("attention y", y, ref, "y");
  check_torch("attention dx", dx, ref, "dx");
  check_torch("attention dwqkv", wqkv.grad, ref, "dwqkv");
  check_torch("attention dbqkv", bqkv.grad, ref, "dbqkv");
  check_torch("attention dwproj", wproj.grad, ref, "dwproj");
  check_torch("attention dbproj", bproj.grad, ref, "dbproj");
  CausalSelfAttention attn16(to_dtype(wqkv, DType::bf16), to_dtype(bqkv, DType::bf16),
                             to_dtype(wproj, DType::bf16), to_dtype(bproj, DType::bf16), heads);
  check_bf16("attention", attn16.forward(x.to(DType::bf16)), y);
}

BOOST_AUTO_TEST_CASE(cross_entropy) {
  std::mt19937 gen(16);
  const std::int64_t rows = 7, vocab = 39;
  Tensor logits = random_tensor({rows, vocab}, f32, gen, -4, 4);
  Tensor targets = Tensor::from_doubles({3, 0, -1, 38, 17, -1, 5}, DType::i64);
  const double normaliser = 11.0, dloss = 0.7;  // e.g. targets of the whole global batch
  CrossEntropy ce;
  Tensor loss = ce.forward(logits, targets, normaliser);
  Tensor dlogits = ce.backward(dloss);
  TorchCase ref("cross_entropy");
  ref.input("logits", logits), ref.input("targets", targets);
  ref.arg("normaliser", normaliser), ref.arg("dloss", dloss);
  ref.run();
  check_torch("cross-entropy loss", loss, ref, "loss");
  check_torch("cross-entropy dlogits", dlogits, ref, "dlogits");
  Tensor loss16 = ce.forward(logits.to(DType::bf16), targets, normaliser);
  BOOST_TEST(loss16.dtype() == f32);  // statistics stay fp32 for bf16 logits
  check_close("cross-entropy bf16 vs f32", loss16, loss, 4e-2);
}

BOOST_AUTO_TEST_SUITE_END()
