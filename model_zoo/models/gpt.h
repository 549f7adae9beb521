// GPT-2: token + position embedding, n_layer pre-LayerNorm transformer
// blocks (x + attn(ln_1(x)); x + mlp(ln_2(x)), GELU tanh, no dropout, LN eps
// 1e-5), a final LayerNorm and an LM head tied to the token embedding.
// Parameter names and shapes are Hugging Face GPT-2's (Conv1D weights [in, out]).
//
// Note [Padded vocabulary]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// cuBLAS picks slow unaligned kernels for the LM head's GEMMs when the
// vocabulary is odd (GPT-2's 50257: 15.6 ms of a step's three head GEMMs on
// an H200 went to an sm75 align1 kernel). Inside the model the token table
// has padded_vocab_size rows (vocab_size rounded up to ModelConfig::
// vocab_align, 128 by default: 50257 -> 50304): wte.weight keeps its own
// shape [V, C] and asks for V' - V padded rows (Note [Padded rows of a
// parameter] in optim/flat_param/flat_param_layout.h), so init values (the
// same draws: Note [Counter-based parameter init]), checkpoints,
// --init-from, --save and exports are [V, C] as before, and an unpadded
// run's checkpoint loads.
// The padded rows start at zero and stay zero: the embedding uses rows [0, V)
// only (ids are checked against V), and the head's logits of the padded
// columns (x · 0 = 0) take no part in the loss, which gives them a zero
// gradient (Note [Fused classifier] in kernels/nn/cross_entropy.h), so their
// rows of the head's gradient are zero too. A padded run trains the unpadded
// run's numbers up to the GEMMs' rounding.
#pragma once

#include <optional>

#include "zrt/model_zoo/layers/activation_layer.h"
#include "zrt/model_zoo/layers/causal_self_attention.h"
#include "zrt/model_zoo/layers/cross_entropy.h"
#include "zrt/model_zoo/layers/embedding.h"
#include "zrt/model_zoo/layers/layer_norm.h"
#include "zrt/model_zoo/layers/linear.h"
#include "zrt/model_zoo/layers/residual_add.h"
#include "zrt/model_zoo/models/model.h"

namespace zrt::model_zoo {

class Gpt : public Model {
 public:
  // head_unit: ln_f and the LM head in a last unit "head" (ModelConfig::head_unit).
  Gpt(const GptDims& dims, DType dtype, Device device, bool head_unit = false);

  const GptDims& dims() const { return dims_; }
  std::string kind() const override { return "gpt"; }
  // unit 0 "embed_head" = wte, wpe, ln_f (+ tied lm_head.weight); unit i+1 = h.i.
  // With a head unit: unit 0 "embed" = wte, wpe; unit L+1 "head" = ln_f (+
  // lm_head.weight, tied to wte.weight in unit 0).
  std::vector<UnitDef> units() const override;
  // normal(0, 0.02) weights and embeddings; residual projections
  // (attn.c_proj.weight, mlp.c_proj.weight) normal(0, 0.02/sqrt(2·n_layer));
  // zero biases; LayerNorm weight 1, bias 0. A draw is keyed by the seed, the
  // parameter's name and the element's index (Note [Counter-based parameter init]).
  std::map<std::string, ParamInit> param_inits() const override;
  void bind(const ParamLookup& lookup) override;
  // [embed (unit 0), h.0 .. h.{L-1} (units 1..L), ln_f + tied head + loss (unit 0, or L+1 with a head unit)].
  int num_stages() const override { return static_cast<int>(dims_.n_layer) + 2; }
  int stage_unit(int s) const override;
  Tensor stage_forward(int s, const Tensor& x, const Batch& batch, Stream stream) override;
  Tensor stage_backward(int s, const Tensor& dy, Stream stream) override;
  // Stages 1..n_layer (h.0 .. h.{L-1}).
  std::vector<int> block_stages() const override;
  void release_stage(int s) override;
  std::int64_t id_limit() const override { return dims_.vocab_size; }  // the real vocabulary

 private:
  struct Block {
    LayerNorm ln_1;
    CausalSelfAttention attn;
    LayerNorm ln_2;
    Linear c_fc;
    Gelu gelu;
    Linear c_proj;
    ResidualAdd add;
  };
  Tensor block_forward(Block& b, const Tensor& x, Stream stream);
  Tensor block_backward(Block& b, const Tensor& dy, Stream stream);
  void check_stage(int s, const char* what) const;
  void check_bound(const char* what) const;

  std::vector<UnitDef> units(bool head_unit) const;

  GptDims dims_;
  bool head_unit_;
  DType dtype_;
  Device device_;
  std::optional<Embedding> embed_;
  std::vector<Block> blocks_;
  std::optional<LayerNorm> ln_f_;
  std::optional<Linear> lm_head_;
  CrossEntropy loss_;  // over the real vocabulary, in place
};

}  // namespace zrt::model_zoo
