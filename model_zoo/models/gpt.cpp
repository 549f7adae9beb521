#include "zrt/model_zoo/models/gpt.h"

#include <cmath>

#include "zrt/model_zoo/models/param_init.h"

namespace zrt::model_zoo {
namespace {

std::string block_path(std::int64_t i) { return "h." + std::to_string(i); }

// Residual projections get a smaller init so the residual stream's variance
// does not grow with depth (GPT-2 paper, section 2.3).
bool is_residual_projection(const std::string& fqn) {
  auto ends_with = [&](const std::string& s) {
    return fqn.size() >= s.size() && fqn.compare(fqn.size() - s.size(), s.size(), s) == 0;
  };
  return ends_with(".attn.c_proj.weight") || ends_with(".mlp.c_proj.weight");
}

}  // namespace

Gpt::Gpt(const GptDims& dims, DType dtype, Device device, bool head_unit)
    : dims_(dims),
      head_unit_(head_unit),
      dtype_(dtype),
      device_(device),
      loss_(dims.vocab_size, /*in_place=*/true) {
  ZRT_CHECK_ARG(dims_.padded_vocab_size == 0 || dims_.padded_vocab_size >= dims_.vocab_size,
                "gpt: padded vocabulary ", dims_.padded_vocab_size, " is smaller than vocab_size ",
                dims_.vocab_size);
}

std::vector<UnitDef> Gpt::units() const { return units(head_unit_); }

std::vector<UnitDef> Gpt::units(bool head_unit) const {
  const std::int64_t C = dims_.n_embd, V = dims_.vocab_size, P = dims_.block_size;
  const std::vector<ParamDef> ln_f = {{"ln_f", "weight", {C}}, {"ln_f", "bias", {C}}};
  const std::pair<std::string, std::string> lm_head = {"lm_head.weight", "wte.weight"};
  std::vector<UnitDef> units;
  const std::int64_t pad_rows = dims_.model_vocab() - V;  // Note [Padded vocabulary]
  units.push_back({head_unit ? "embed" : "embed_head",
                   {{"wte", "weight", {V, C}, pad_rows}, {"wpe", "weight", {P, C}}},
                   {}});
  if (!head_unit) {
    units[0].params.insert(units[0].params.end(), ln_f.begin(), ln_f.end());
    units[0].tied.push_back(lm_head);
  }
  for (std::int64_t i = 0; i < dims_.n_layer; ++i) {
    const std::string h = block_path(i);
    units.push_back({h,
                     {{h + ".ln_1", "weight", {C}},
                      {h + ".ln_1", "bias", {C}},
                      {h + ".attn.c_attn", "weight", {C, 3 * C}},
                      {h + ".attn.c_attn", "bias", {3 * C}},
                      {h + ".attn.c_proj", "weight", {C, C}},
                      {h + ".attn.c_proj", "bias", {C}},
                      {h + ".ln_2", "weight", {C}},
                      {h + ".ln_2", "bias", {C}},
                      {h + ".mlp.c_fc", "weight", {C, 4 * C}},
                      {h + ".mlp.c_fc", "bias", {4 * C}},
                      {h + ".mlp.c_proj", "weight", {4 * C, C}},
                      {h + ".mlp.c_proj", "bias", {C}}},
                     {}});
  }
  if (head_unit)
    units.push_back({"head", ln_f, {lm_head}});  // lm_head.weight: wte.weight of unit 0
  return units;
}

std::map<std::string, ParamInit> Gpt::param_inits() const {
  const double std = 0.02;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(dims_.n_layer));
  std::map<std::string, ParamInit> out;
  for (const ParamDef& p : all_param_defs(units(false))) {
    const std::string fqn = p.fqn();
    const bool layer_norm = p.module_path.ends_with("ln_1") || p.module_path.ends_with("ln_2") ||
                            p.module_path == "ln_f";
    if (layer_norm)
      out[fqn] = ParamInit::constant(p.name == "weight" ? 1.0 : 0.0);
    else if (p.name == "bias")
      out[fqn] = ParamInit::constant(0.0);
    else
      out[fqn] = ParamInit::normal(is_residual_projection(fqn) ? proj_std : std);
  }
  return out;
}

void Gpt::bind(const ParamLookup& lookup) {
  ZRT_CHECK_CALL(!embed_, "gpt: bind called twice");
  embed_.emplace(lookup("wte.weight"), lookup("wpe.weight"), dims_.vocab_size);
  blocks_.reserve(static_cast<std::size_t>(dims_.n_layer));
  for (std::int64_t i = 0; i < dims_.n_layer; ++i) {
    const std::string h = block_path(i) + ".";
    blocks_.push_back(Block{
        LayerNorm(lookup(h + "ln_1.weight"), lookup(h + "ln_1.bias")),
        CausalSelfAttention(lookup(h + "attn.c_attn.weight"), lookup(h + "attn.c_attn.bias"),
                            lookup(h + "attn.c_proj.weight"), lookup(h + "attn.c_proj.bias"),
                            dims_.n_head, WeightLayout::in_out),
        LayerNorm(lookup(h + "ln_2.weight"), lookup(h + "ln_2.bias")),
        Linear(lookup(h + "mlp.c_fc.weight"), lookup(h + "mlp.c_fc.bias"), WeightLayout::in_out),
        Gelu(),
        Linear(lookup(h + "mlp.c_proj.weight"), lookup(h + "mlp.c_proj.bias"),
               WeightLayout::in_out),
        ResidualAdd()});
  }
  ln_f_.emplace(lookup("ln_f.weight"), lookup("ln_f.bias"));
  // The LM head reads the token embedding in place: logits = x · wteᵀ.
  lm_head_.emplace(lookup("lm_head.weight"), std::nullopt, WeightLayout::out_in);
}

int Gpt::stage_unit(int s) const {
  check_stage(s, "stage_unit");
  if (s < num_stages() - 1) return s;
  return head_unit_ ? static_cast<int>(dims_.n_layer) + 1 : 0;
}

void Gpt::check_stage(int s, const char* what) const {
  ZRT_CHECK_ARG(s >= 0 && s < num_stages(), "gpt ", what, ": stage ", s, " is not in [0, ",
                num_stages(), ")");
}

void Gpt::check_bound(const char* what) const {
  ZRT_CHECK_CALL(embed_.has_value(), "gpt ", what, ": bind() has not been called");
}

Tensor Gpt::stage_forward(int s, const Tensor& x, const Batch& batch, Stream stream) {
  check_stage(s, "stage_forward");
  check_bound("stage_forward");
  if (s == 0) {
    const Tensor& ids = batch.inputs;
    ZRT_CHECK_ARG(ids.dim() == 2 && (ids.dtype() == DType::i32 || ids.dtype() == DType::i64),
                  "gpt: inputs ", ids.str(), " must be [b, T] i32/i64 token ids");
    ZRT_CHECK_ARG(ids.size(1) <= dims_.block_size, "gpt: sequence length ", ids.size(1),
                  " exceeds block_size ", dims_.block_size);
    return embed_->forward(ids.device() == device_ ? ids : ids.to(device_), stream, id_check());
  }
  if (s <= dims_.n_layer) return block_forward(blocks_[static_cast<std::size_t>(s - 1)], x, stream);
  const Tensor& targets = batch.targets;
  ZRT_CHECK_ARG(x.dim() == 3 && targets.shape() == Shape({x.size(0), x.size(1)}), "gpt: targets ",
                targets.str(), " must be [b, T] for activations ", x.str());
  Tensor logits = lm_head_->forward(ln_f_->forward(x, stream), stream);
  return loss_.forward(logits, targets.device() == device_ ? targets : targets.to(device_),
                       batch.normaliser, stream, id_check(), batch.dloss);
}

Tensor Gpt::stage_backward(int s, const Tensor& dy, Stream stream) {
  check_stage(s, "stage_backward");
  check_bound("stage_backward");
  if (s == 0) {
    embed_->backward(dy, GradMode::accumulate, stream);
    return Tensor();
  }
  if (s <= dims_.n_layer)
    return block_backward(blocks_[static_cast<std::size_t>(s - 1)], dy, stream);
  ZRT_CHECK_ARG(dy.numel() == 1, "gpt: the last stage takes dloss as a 1-element tensor, got ",
                dy.str());
  Tensor dlogits = loss_.backward(dy.item(0), stream);
  Tensor dh = lm_head_->backward(dlogits, GradMode::accumulate, stream);
  return ln_f_->backward(dh, GradMode::accumulate, stream);
}

std::vector<int> Gpt::block_stages() const {
  std::vector<int> stages;
  for (int s = 1; s <= dims_.n_layer; ++s) stages.push_back(s);
  return stages;
}

void Gpt::release_stage(int s) {
  ZRT_CHECK_ARG(s >= 1 && s <= dims_.n_layer, "gpt release_stage: stage ", s,
                " is not a block (1..", dims_.n_layer, ")");
  check_bound("release_stage");
  Block& b = blocks_[static_cast<std::size_t>(s - 1)];
  b.ln_1.release();
  b.attn.release();
  b.ln_2.release();
  b.c_fc.release();
  b.gelu.release();
  b.c_proj.release();
}

Tensor Gpt::block_forward(Block& b, const Tensor& x, Stream stream) {
  Tensor x1 = b.add.forward(x, b.attn.forward(b.ln_1.forward(x, stream), stream), stream);
  // c_fc's bias and the GELU in one GEMM epilogue where it can be (Note [GEMM
  // epilogues]); the GELU layer keeps the pre-activation for its backward.
  Linear::GeluOutput h = b.c_fc.forward_gelu(b.ln_2.forward(x1, stream), stream);
  b.gelu.record_input(h.pre);
  Tensor m = b.c_proj.forward(h.out, stream);
  return b.add.forward(x1, m, stream);
}

Tensor Gpt::block_backward(Block& b, const Tensor& dy, Stream stream) {
  const GradMode acc = GradMode::accumulate;
  // out = x1 + mlp(ln_2(x1)): dx1 = dy + ln_2'(mlp'(dy)).
  Tensor dm =
      b.c_fc.backward(b.gelu.backward(b.c_proj.backward(dy, acc, stream), stream), acc, stream);
  Tensor dx1 = b.add.forward(dy, b.ln_2.backward(dm, acc, stream), stream);
  // x1 = x + attn(ln_1(x)): dx = dx1 + ln_1'(attn'(dx1)).
  Tensor da = b.attn.backward(dx1, acc, stream);
  return b.add.forward(dx1, b.ln_1.backward(da, acc, stream), stream);
}

}  // namespace zrt::model_zoo
